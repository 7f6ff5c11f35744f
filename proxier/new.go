package proxier

import (
	"fmt"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// Config is what an Engine is built from: the rules' configuration per IP
// family and what runs beside the rules. The daemon, the sync and render
// commands, the e2e harness and the scale probe all build theirs with New.
type Config struct {
	// Families configures one table, and its generator, per IP family.
	Families []nftgen.Config
	// Node is this node as the model sees it (name and labels).
	Node svcmodel.Node
	// Store holds the Services and EndpointSlices; nil for a new one.
	Store *model.Store
	// Health, Conntrack and Metrics may be nil.
	Health    HealthServer
	Conntrack ConntrackCleaner
	Metrics   *metrics.Metrics
	// ChunkOps sizes the transactions of a streamed cold sync (0:
	// nftgen.ChunkOps).
	ChunkOps int
	// TableShards is the number of shard tables per family; 0 chooses by
	// the number of Services (see nftgen.ChooseLayout).
	TableShards int
	// Engine configures the sync loop.
	Engine EngineConfig
}

// New builds the engine that programs dp from cfg.
func New(cfg Config, dp nftgen.Dataplane) (*Engine, error) {
	gens, err := Generators(cfg.Families)
	if err != nil {
		return nil, err
	}
	store := cfg.Store
	if store == nil {
		store = model.NewStore()
	}
	s := newSyncer(store, dp, gens...)
	s.ChunkOps, s.TableShards = cfg.ChunkOps, cfg.TableShards
	p := newProxier(store, s, cfg.Node)
	p.Health, p.Conntrack, p.Metrics = cfg.Health, cfg.Conntrack, cfg.Metrics
	return newEngine(p, dp, cfg.Engine), nil
}

// Generators builds one generator per family configuration.
func Generators(families []nftgen.Config) ([]*nftgen.Generator, error) {
	var gens []*nftgen.Generator
	for _, fc := range families {
		g, err := nftgen.NewGenerator(fc)
		if err != nil {
			return nil, fmt.Errorf("configure the %s table: %w", fc.Family, err)
		}
		gens = append(gens, g)
	}
	return gens, nil
}

// Proxier returns the engine's proxier: its store, syncer and metrics.
func (e *Engine) Proxier() *Proxier { return e.p }
