package proxier

import (
	"context"
	"fmt"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
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
	pipe := pipeline.New(store, dp, gens...)
	pipe.ChunkOps, pipe.TableShards = cfg.ChunkOps, cfg.TableShards
	return newEngine(store, pipe, newAfterSync(cfg, store, pipe), dp, cfg.Engine), nil
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

// Families returns the families the engine programs.
func (e *Engine) Families() []nftgen.Family {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pipe.Families()
}

// DesiredRuleset returns what a full sync would program in family f now,
// as one table (see pipeline.Pipeline.DesiredRuleset); no kernel is read.
func (e *Engine) DesiredRuleset(f nftgen.Family) *nftgen.Ruleset {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pipe.DesiredRuleset(f)
}

// DesiredTables returns the tables a full sync would program in family f
// now, in the layout it would choose.
func (e *Engine) DesiredTables(f nftgen.Family) []*nftgen.Ruleset {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pipe.DesiredTables(f)
}

// Tables returns the rolling check's round: the largest number of tables
// of any family as of its last full sync.
func (e *Engine) Tables() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tables()
}

// FullSync rewrites every family's tables now, for reason, whatever the
// engine's policy would decide (a tool's measure of the periodic full
// sync); the health and metrics follow as after any sync.
func (e *Engine) FullSync(ctx context.Context, reason string) (pipeline.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.after.sync(ctx, reason)
}
