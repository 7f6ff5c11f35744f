package source

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// LabelServiceProxyName marks Services (and their slices) that another
// proxy handles; kube-proxy ignores them, and so does nftproxy.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// Sink receives the objects. Its methods are called from informer
// goroutines, one at a time per informer.
type Sink interface {
	SetParsedService(*model.Service)
	DeleteService(types.NamespacedName)
	SetSlice(*model.Slice)
	DeleteEndpointSlice(namespace, name string)
	// SetNode is called with this node's Node, or nil when it is deleted.
	SetNode(*v1.Node)
}

// Selector is kube-proxy's label selector for Services and EndpointSlices:
// no service-proxy-name label and no headless label.
func Selector() string {
	noProxyName, _ := labels.NewRequirement(LabelServiceProxyName, selection.DoesNotExist, nil)
	noHeadless, _ := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*noProxyName, *noHeadless).String()
}

// Selected reports whether an object with these labels is one kube-proxy
// watches (see Selector); objects files are filtered with it too.
func Selected(l map[string]string) bool {
	_, proxyName := l[LabelServiceProxyName]
	_, headless := l[v1.IsHeadlessService]
	return !proxyName && !headless
}

// Replacer receives, after (re)starting the informers, the complete lists
// they synced, so that objects deleted while the API server was away are
// removed.
type Replacer interface {
	Replace(services []*model.Service, slices []*model.Slice)
}

// Run keeps informers running until ctx ends. When a watch fails (the API
// server went away, or the watch expired with 410 Gone), it polls the API
// server's /readyz and, once it answers, restarts the informers with a
// fresh list instead of waiting out client-go's reflector backoff (up to
// 30 s), then hands the lists to sink. Rules are never dropped meanwhile:
// the sink keeps the last known state. synced is called after each
// successful (re)start.
//
// connErrors, if not nil, signals failed requests to the API server (see
// ErrorSignal); client-go's reflector retries refused connections on its
// own without reporting them, so this is how an outage is noticed.
func Run(ctx context.Context, client kubernetes.Interface, nodeName string, resync time.Duration, sink interface {
	Sink
	Replacer
}, synced func(), connErrors <-chan struct{}) {
	for ctx.Err() == nil {
		ictx, cancel := context.WithCancel(ctx)
		broken := make(chan struct{}, 1)
		onError := func(_ context.Context, _ *cache.Reflector, err error) {
			klog.FromContext(ctx).Info("Watch ended with an error; relisting without touching the rules", "err", err)
			select {
			case broken <- struct{}{}:
			default:
			}
		}
		svcs, slices, hasSynced := start(ictx, client, nodeName, resync, sink, onError)
		for !hasSynced() {
			select {
			case <-ctx.Done():
				cancel()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		sink.Replace(listOf[*model.Service](svcs), listOf[*model.Slice](slices))
		synced()
		// Drain errors from before and during the list.
		for drained := false; !drained; {
			select {
			case <-connErrors:
			default:
				drained = true
			}
		}
		select {
		case <-ctx.Done():
			cancel()
			return
		case <-broken:
		case <-connErrors:
		}
		if ready(ctx, client) {
			// A passing error (a watch timing out, a 410 Gone): the
			// informers relist on their own.
			cancel()
			continue
		}
		klog.FromContext(ctx).Info("Lost the API server; rules stay, waiting for it to come back")
		for !ready(ctx, client) {
			select {
			case <-ctx.Done():
				cancel()
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
		klog.FromContext(ctx).Info("API server is back; relisting")
		cancel()
	}
}

// ErrorSignal wraps a RoundTripper and signals on C, without blocking,
// every request that fails to get an answer.
type ErrorSignal struct {
	Next http.RoundTripper
	C    chan struct{}
}

// RoundTrip implements http.RoundTripper.
func (e *ErrorSignal) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := e.Next.RoundTrip(req)
	if err != nil {
		select {
		case e.C <- struct{}{}:
		default:
		}
	}
	return resp, err
}

func ready(ctx context.Context, client kubernetes.Interface) bool {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).Error() == nil
}

func listOf[T any](inf cache.SharedIndexInformer) []T {
	var out []T
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// start starts the informers and returns them and a function that reports
// whether all of them have synced. Informers keep their cache when the API
// server goes away and relist when their watch expires, so the sink keeps
// the last known state.
func start(ctx context.Context, client kubernetes.Interface, nodeName string, resync time.Duration, sink Sink,
	onError cache.WatchErrorHandlerWithContext) (svcs, slices cache.SharedIndexInformer, hasSynced func() bool) {
	trim := model.NewTrimmer()
	selector := func(o *metav1.ListOptions) { o.LabelSelector = Selector() }
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(trim.Transform))
	// Without the namespace index the factory's informers keep: nothing
	// reads it, and at 30,000 Services and as many slices it held 6.7 MB
	// of key sets.
	svcs = factory.InformerFor(&v1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, selector)
	})
	_, _ = svcs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sink.SetParsedService(obj.(*model.Service)) },
		UpdateFunc: func(_, obj any) { sink.SetParsedService(obj.(*model.Service)) },
		DeleteFunc: func(obj any) {
			if svc, ok := unwrap[*model.Service](obj); ok {
				sink.DeleteService(svc.Key())
			}
		},
	})
	slices = factory.InformerFor(&discovery.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, selector)
	})
	_, _ = slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sink.SetSlice(obj.(*model.Slice)) },
		UpdateFunc: func(_, obj any) { sink.SetSlice(obj.(*model.Slice)) },
		DeleteFunc: func(obj any) {
			if sl, ok := unwrap[*model.Slice](obj); ok {
				key := sl.Key()
				sink.DeleteEndpointSlice(key.Namespace, key.Name)
			}
		},
	})
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
		}),
		informers.WithTransform(trim.Transform))
	nodes := nodeFactory.Core().V1().Nodes().Informer()
	_, _ = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sink.SetNode(obj.(*v1.Node)) },
		UpdateFunc: func(_, obj any) { sink.SetNode(obj.(*v1.Node)) },
		DeleteFunc: func(any) { sink.SetNode(nil) },
	})
	if onError != nil {
		for _, inf := range []cache.SharedIndexInformer{svcs, slices, nodes} {
			_ = inf.SetWatchErrorHandlerWithContext(onError)
		}
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	return svcs, slices, func() bool { return svcs.HasSynced() && slices.HasSynced() && nodes.HasSynced() }
}

func unwrap[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := d.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

// NodeOf lists this node's Node (a list with a field selector, so that the
// ClusterRole needs no "get"). It returns nil without error when the Node
// does not exist.
func NodeOf(ctx context.Context, client kubernetes.Interface, nodeName string) (*v1.Node, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", nodeName).String()})
	if err != nil {
		return nil, fmt.Errorf("list node %s: %w", nodeName, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
