package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// Kubernetes is the Runtime over a Kubernetes cluster: one bare pod per
// container, labelled like our Docker containers (orphans are found by label
// selector), the first request and every later frame over the attach stream
// (the pod may run on any node, so the Backend uses the protocol's stream
// transport: see Remote), exit code and OOMKilled from the pod status by a
// watch, the log for a bounded tail, and delete for both kill and remove.
type Kubernetes struct {
	cfg  KubernetesConfig
	log  *slog.Logger
	warm *warmPool
}

// KubernetesConfig configures the Kubernetes runtime.
type KubernetesConfig struct {
	// Client talks to the API server (required). REST is the configuration
	// it was made from, needed to attach (nil only for unit tests on a fake
	// clientset, where Start cannot attach).
	Client kubernetes.Interface
	REST   *rest.Config
	// Namespace holds the pods (default "default").
	Namespace string
	// PullPolicy is the containers' imagePullPolicy (default IfNotPresent).
	PullPolicy corev1.PullPolicy
	// NodeSelector and Tolerations steer the pods onto nodes.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// CPURequest and MemoryRequest are what the scheduler reserves for each
	// container (capped by its limits; default "100m" and "256Mi"): the
	// limits come from the backend's Limits.
	CPURequest, MemoryRequest string
	// ServiceAccount runs the pods (default: the namespace's default). Its
	// token is never mounted.
	ServiceAccount string
	// Volumes says how the host directories the backend mounts (the
	// workspace, extra mounts) reach the pods.
	Volumes VolumeMapping
	// StartTimeout bounds scheduling and starting a pod (default 5m).
	StartTimeout time.Duration
	// WarmPods is how many started pods wait, per pod shape, for the next
	// agent container of that shape (0: none; docs/kubernetes.md, "Warm
	// pods"). WarmIdle is how long one waits unclaimed before it is
	// deleted (default 10m).
	WarmPods int
	WarmIdle time.Duration
	// OnPodStart, when set, is told how long each Start took and where the
	// time went (benchmarks; the same is logged at debug level).
	OnPodStart func(PodStart)
	// Source says where the client's configuration came from (messages).
	Source string
	Logger *slog.Logger
}

// VolumeMapping maps host directories to pod volumes. With a Claim, the
// PersistentVolumeClaim holds the tree of HostRoot on the host (e.g. both
// see the same NFS export): a mount of HostRoot/groups/main becomes the
// claim with subPath groups/main. Without one, each host directory is a
// hostPath volume of the same path — right for a one-node cluster on the
// host itself, or nodes that mount the same share at the same path.
type VolumeMapping struct {
	Claim    string
	HostRoot string
}

// Defaults of the Kubernetes runtime.
const (
	DefaultKubernetesNamespace = "default"
	DefaultCPURequest          = "100m"
	DefaultMemoryRequest       = "256Mi"
	DefaultPodStartTimeout     = 5 * time.Minute
	DefaultWarmIdle            = 10 * time.Minute
)

// NewKubernetes checks the configuration and returns the runtime.
func NewKubernetes(cfg KubernetesConfig) (*Kubernetes, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes runtime: no client configured")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultKubernetesNamespace
	}
	switch cfg.PullPolicy {
	case "":
		cfg.PullPolicy = corev1.PullIfNotPresent
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, fmt.Errorf("kubernetes runtime: image pull policy %q: want Always, IfNotPresent or Never", cfg.PullPolicy)
	}
	if cfg.CPURequest == "" {
		cfg.CPURequest = DefaultCPURequest
	}
	if cfg.MemoryRequest == "" {
		cfg.MemoryRequest = DefaultMemoryRequest
	}
	if cfg.Volumes.Claim != "" && cfg.Volumes.HostRoot == "" {
		return nil, errors.New("kubernetes runtime: a workspace claim needs the host directory it holds (workspace_host_root)")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultPodStartTimeout
	}
	if cfg.WarmPods < 0 {
		return nil, fmt.Errorf("kubernetes runtime: %d warm pods: want 0 or more", cfg.WarmPods)
	}
	if cfg.WarmIdle <= 0 {
		cfg.WarmIdle = DefaultWarmIdle
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := &Kubernetes{cfg: cfg, log: cfg.Logger.With("component", "kubernetes")}
	k.warm = newWarmPool(k, cfg.WarmPods, cfg.WarmIdle)
	return k, nil
}

// Close deletes the warm pods (and stops making more). The pods of
// running containers are the Backend's to remove.
func (k *Kubernetes) Close() { k.warm.close() }

// Capabilities: a pod may run on any node (Remote), so nothing of the
// host's is mounted but the volumes VolumeMapping provides.
func (k *Kubernetes) Capabilities() Capabilities { return Capabilities{Remote: true} }

// Namespace is where the runtime's pods live.
func (k *Kubernetes) Namespace() string { return k.cfg.Namespace }

// Client is the API client (diagnostics, tests).
func (k *Kubernetes) Client() kubernetes.Interface { return k.cfg.Client }

func (k *Kubernetes) pods() podsAPI { return k.cfg.Client.CoreV1().Pods(k.cfg.Namespace) }

type podsAPI = interface {
	Create(context.Context, *corev1.Pod, metav1.CreateOptions) (*corev1.Pod, error)
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	GetLogs(string, *corev1.PodLogOptions) *rest.Request
}

// Start creates the pod, waits for its container to run and attaches to
// its stdio — or, for an agent container whose shape has a warm pod
// ready, claims that pod and attaches to it. A container without stdin
// waits (gateScript) until the attach stream exists, then gets a newline
// and EOF.
func (k *Kubernetes) Start(ctx context.Context, spec Spec) (_ *Handle, err error) {
	pod, err := k.podFor(spec)
	if err != nil {
		return nil, fmt.Errorf("pod for %s: %w", spec.Name, err)
	}
	began := time.Now()
	if spec.Stdin && k.warm.size > 0 {
		// Only an agent's runner waits for its first request (on stdin)
		// before it does anything: only its pod can start ahead of time.
		shape := podShape(pod)
		if h, ok := k.claimWarm(ctx, shape, began); ok {
			k.warm.fill(shape, pod)
			return h, nil
		}
		defer func() {
			if err == nil {
				k.warm.fill(shape, pod)
			}
		}()
	}
	trace := PodStart{}
	created, err := k.pods().Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if _, unreachable := errors.AsType[net.Error](err); unreachable && ctx.Err() == nil {
			return nil, fmt.Errorf("create pod %s: %w: %v (start the cluster again, or check runtime.kubernetes)", pod.Name, ErrRuntimeUnavailable, err)
		}
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	name := created.Name
	trace.Pod, trace.Created = name, time.Since(began)
	h, err := k.attachWhenRunning(ctx, name, spec.Image, &trace, began)
	if err != nil {
		k.removeQuietly(name)
		return nil, err
	}
	trace.Attached = time.Since(began)
	k.traced(trace)
	if !spec.Stdin {
		_, err := h.Stdin.Write([]byte("\n"))
		if err == nil {
			err = h.Stdin.Close()
		}
		h.Stdin = nil
		if err != nil {
			h.Close()
			k.removeQuietly(name)
			return nil, fmt.Errorf("start pod %s: %w", name, err)
		}
	}
	return h, nil
}

// claimWarm attaches to a warm pod of the shape, if one is ready. The pod
// is the claimer's alone from then on: it is never handed out again.
func (k *Kubernetes) claimWarm(ctx context.Context, shape string, began time.Time) (*Handle, bool) {
	name, ok := k.warm.take(shape)
	if !ok {
		return nil, false
	}
	h, connected, err := k.attach(name)
	if err == nil {
		// A pod that died while it waited (its node went away, an
		// eviction) is no use: find out now, not from a silent stream.
		select {
		case err = <-connected:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			h.Close()
		}
	}
	if err != nil {
		k.log.Warn("a warm pod could not be claimed; starting a new one", "pod", name, "err", err)
		k.removeQuietly(name)
		return nil, false
	}
	k.traced(PodStart{Pod: name, Warm: true, Attached: time.Since(began)})
	return h, true
}

// attachRetry is the first and attachRetryMax the longest wait between two
// attaches to a pod that is bound but whose container does not run yet.
const (
	attachRetry    = 50 * time.Millisecond
	attachRetryMax = 100 * time.Millisecond
)

// attachWhenRunning watches the pod start and, from the moment it is bound
// to a node, attaches to its container as soon as the container runs. The
// kubelet serves an attach by asking the container runtime which
// containers run, but reports a container Running in the pod's status only
// at its next relist (every 1 s): so attaching is tried again, after a
// short and growing wait, until it connects, while the watch still says
// why a pod never will start (a missing image, the StartTimeout). Once
// the status says started (running or already ended) one attach is made
// whatever it finds: one that fails shows as stdout ending and the caller
// learns how the container ended from Wait.
func (k *Kubernetes) attachWhenRunning(ctx context.Context, name, image string, trace *PodStart, began time.Time) (*Handle, error) {
	wctx, cancel := context.WithCancel(ctx)
	bound := make(chan struct{})
	var boundOnce sync.Once
	watched := make(chan error, 1)
	go func() {
		watched <- k.waitRunning(wctx, name, image, trace, began, func() { boundOnce.Do(func() { close(bound) }) })
	}()
	stopWatch := func() { cancel(); <-watched }
	select {
	case <-bound:
	case err := <-watched:
		cancel()
		if err != nil {
			return nil, err
		}
		return k.attachOnce(ctx, name)
	}
	for wait := attachRetry; ; wait = min(2*wait, attachRetryMax) {
		h, connected, err := k.attachWith(name, true)
		if err != nil {
			stopWatch()
			return nil, err
		}
		select {
		case err = <-connected:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err == nil {
			stopWatch()
			return h, nil
		}
		h.Close()
		select {
		case err := <-watched:
			cancel()
			if err != nil {
				return nil, err
			}
			return k.attachOnce(ctx, name)
		case <-time.After(wait):
		}
	}
}

// attachOnce attaches to a container the pod's status says has started.
func (k *Kubernetes) attachOnce(ctx context.Context, name string) (*Handle, error) {
	h, connected, err := k.attach(name)
	if err != nil {
		return nil, err
	}
	select {
	case <-connected:
	case <-ctx.Done():
	}
	return h, nil
}

// PodStart is where the time of one Start went, each phase measured from
// the start (as this process saw the watch events, so Scheduled and
// Running include the API server's and the kubelet's delays in telling).
type PodStart struct {
	Pod string
	// Warm: a warm pod was claimed (only Attached is set).
	Warm bool
	// Created: the API server accepted the pod. Scheduled: it was bound
	// to a node. Running: its container's state was running (0 when the
	// attach connected before the status said so). Attached: its stdio
	// was connected.
	Created, Scheduled, Running, Attached time.Duration
}

func (k *Kubernetes) traced(t PodStart) {
	k.log.Debug("pod started", "pod", t.Pod, "warm", t.Warm, "created", t.Created, "scheduled", t.Scheduled,
		"running", t.Running, "attached", t.Attached)
	if k.cfg.OnPodStart != nil {
		k.cfg.OnPodStart(t)
	}
}

// waitRunning watches the pod until its container runs; bound, when set,
// is called once the pod is bound to a node. A missing image, a container
// that cannot be created, or a pod still unscheduled after StartTimeout is
// an error that says why.
func (k *Kubernetes) waitRunning(ctx context.Context, name, image string, trace *PodStart, began time.Time, bound func()) error {
	wctx, cancel := context.WithTimeout(ctx, k.cfg.StartTimeout)
	defer cancel()
	err := k.watchPod(wctx, name, func(p *corev1.Pod) (bool, error) {
		if trace.Scheduled == 0 && p.Spec.NodeName != "" {
			trace.Scheduled = time.Since(began)
			if bound != nil {
				bound()
			}
		}
		started, err := podStarted(p, image)
		if started {
			trace.Running = time.Since(began)
		}
		return started, err
	})
	switch {
	case err == nil || wctx.Err() == nil:
		return err
	case ctx.Err() == nil:
		return fmt.Errorf("pod %s did not start in %s: %s", name, k.cfg.StartTimeout, k.whyPending(name))
	default: // the caller gave up (a node timeout, a cancelled run)
		return fmt.Errorf("pod %s not started (%s): %w", name, k.whyPending(name), ctx.Err())
	}
}

// whyPending says what holds a pod, as the API server sees it now: the
// watch may have been too slow, on a busy host, to see the last change.
func (k *Kubernetes) whyPending(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := k.pods().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "its status could not be read: " + err.Error()
	}
	return pendingReason(p)
}

// podStarted reports whether the container runs (or already ended), or why
// it never will.
func podStarted(p *corev1.Pod, image string) (bool, error) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != podContainer {
			continue
		}
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true, nil
		}
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				return false, fmt.Errorf("pod %s: %w: %s (%s: %s; import it into the nodes, or set the image pull policy)",
					p.Name, ErrImageNotFound, image, w.Reason, w.Message)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return false, fmt.Errorf("pod %s: %s: %s", p.Name, w.Reason, w.Message)
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true, nil
	}
	return false, nil
}

// pendingReason says why a pod is not running yet.
func pendingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s: %s", nonEmpty(c.Reason, string(c.Type)), c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return strings.TrimSpace(w.Reason + " " + w.Message)
		}
	}
	return "phase " + string(p.Status.Phase)
}

// watchPod calls done with the pod now and at every change until it says
// stop, returns an error, or ctx ends. A deleted pod is an error.
func (k *Kubernetes) watchPod(ctx context.Context, name string, done func(*corev1.Pod) (bool, error)) error {
	for {
		p, err := k.pods().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s was deleted", name)
		}
		if err != nil {
			return fmt.Errorf("get pod %s: %w", name, err)
		}
		if stop, err := done(p); stop || err != nil {
			return err
		}
		w, err := k.pods().Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: p.ResourceVersion,
		})
		if err != nil {
			return fmt.Errorf("watch pod %s: %w", name, err)
		}
		stop, err := k.follow(ctx, w, name, done)
		w.Stop()
		if stop || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The watch ended (a server timeout): look again and watch anew.
	}
}

func (k *Kubernetes) follow(ctx context.Context, w watch.Interface, name string, done func(*corev1.Pod) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				if p, ok := ev.Object.(*corev1.Pod); ok && p.Name != name {
					continue
				}
				return true, fmt.Errorf("pod %s was deleted", name)
			case watch.Error:
				return false, nil
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Name == name {
				if stop, err := done(p); stop || err != nil {
					return true, err
				}
			}
		}
	}
}

// attach connects to the container's stdin, stdout and stderr (WebSocket,
// or SPDY on an older API server) in the background; connected then says
// whether the streams exist (nil) or why they never will.
func (k *Kubernetes) attach(name string) (_ *Handle, connected <-chan error, _ error) {
	return k.attachWith(name, false)
}

// attachWith attaches over SPDY alone when early: the API server answers a
// WebSocket attach by upgrading first and only then asking the kubelet
// (it translates to SPDY), so a container that does not run yet shows as
// a stream that connected and then failed, while over SPDY the kubelet's
// refusal fails the upgrade itself, before the stream is said connected.
func (k *Kubernetes) attachWith(name string, early bool) (_ *Handle, connected <-chan error, _ error) {
	if k.cfg.REST == nil {
		return nil, nil, fmt.Errorf("attach pod %s: no REST configuration to attach with", name)
	}
	req := k.cfg.Client.CoreV1().RESTClient().Post().Namespace(k.cfg.Namespace).Resource("pods").Name(name).
		SubResource("attach").VersionedParams(&corev1.PodAttachOptions{
		Container: podContainer, Stdin: true, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(k.cfg.REST, "GET", req.URL().String())
	if err != nil {
		return nil, nil, fmt.Errorf("attach pod %s: %w", name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(k.cfg.REST, "POST", req.URL())
	if err != nil {
		return nil, nil, fmt.Errorf("attach pod %s: %w", name, err)
	}
	var exec remotecommand.Executor = spdy
	if !early {
		exec, err = remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("attach pod %s: %w", name, err)
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan error, 1)
	stdin := &endOnClose{r: inR, connected: ready}
	go func() {
		err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: outW, Stderr: errW})
		if err != nil && ctx.Err() == nil {
			k.log.Debug("attach stream ended", "pod", name, "err", err)
		}
		stdin.once.Do(func() { ready <- fmt.Errorf("attach pod %s: %w", name, nonEmptyErr(err)) })
		// Writers to a stream that is gone must not block forever.
		inR.CloseWithError(errors.New("the pod's attach stream has ended"))
		outW.Close()
		errW.Close()
	}()
	var once sync.Once
	return &Handle{ID: name, Name: name, Stdin: inW, Stdout: outR, Stderr: errR,
		close: func() { once.Do(func() { cancel(); inW.Close() }) }}, ready, nil
}

func nonEmptyErr(err error) error {
	if err == nil {
		return errors.New("the stream ended at once")
	}
	return err
}

// endOnClose is the attach stream's stdin: once the stream is over (and
// the pipe closed so that writers fail), client-go's stdin copier, which
// may still be reading, sees the end of its input rather than an error it
// would print to stderr. Its first read says the stream is connected:
// client-go reads stdin only once the streams exist.
type endOnClose struct {
	r         *io.PipeReader
	once      sync.Once
	connected chan<- error
}

func (e *endOnClose) Read(p []byte) (int, error) {
	e.once.Do(func() { e.connected <- nil })
	n, err := e.r.Read(p)
	if errors.Is(err, io.ErrClosedPipe) {
		err = io.EOF
	}
	return n, err
}

// Wait watches the pod until its container has ended.
func (k *Kubernetes) Wait(ctx context.Context, id string) (Exit, error) {
	var exit Exit
	err := k.watchPod(ctx, id, func(p *corev1.Pod) (bool, error) {
		var done bool
		exit, done = podExit(p)
		if !done && p.Status.Phase == corev1.PodFailed {
			return true, fmt.Errorf("pod %s failed: %s %s", id, p.Status.Reason, p.Status.Message)
		}
		return done, nil
	})
	if err != nil {
		return Exit{}, fmt.Errorf("wait pod %s: %w", id, err)
	}
	return exit, nil
}

// podExit is how the container ended, once it has.
func podExit(p *corev1.Pod) (Exit, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == podContainer && t != nil {
			return Exit{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}, true
		}
	}
	return Exit{}, false
}

// Kill deletes the pod at once: Kubernetes has no signal to send to a
// container, and a killed container of ours is never restarted.
func (k *Kubernetes) Kill(ctx context.Context, id string) error {
	zero := int64(0)
	err := k.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kill pod %s: %w", id, err)
	}
	return nil
}

// Remove deletes the pod and waits until it is gone.
func (k *Kubernetes) Remove(ctx context.Context, id string) error {
	if err := k.Kill(ctx, id); err != nil {
		return fmt.Errorf("remove %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := k.pods().Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove pod %s: still there: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func (k *Kubernetes) removeQuietly(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Kill(ctx, name); err != nil {
		k.log.Warn("delete pod", "pod", name, "err", err)
	}
}

// List returns the pods carrying all the labels.
func (k *Kubernetes) List(ctx context.Context, want map[string]string) ([]Info, error) {
	sel := map[string]string{}
	for key, v := range want {
		sel[key] = labelValue(v)
	}
	list, err := k.pods().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods in namespace %s: %w", k.cfg.Namespace, err)
	}
	out := make([]Info, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		out = append(out, Info{ID: p.Name, Name: p.Name, Labels: podLabels(p),
			State: strings.ToLower(string(p.Status.Phase)), Created: p.CreationTimestamp.Time})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// LogTail is the end of the container's log (stdout and stderr together),
// at most max bytes: what a container said before it died when the attach
// stream missed it. The kubelet serves a container's log only once it has
// reported the container started, which Start no longer waits for.
func (k *Kubernetes) LogTail(ctx context.Context, id string, max int) (string, error) {
	if err := k.waitRunning(ctx, id, "", &PodStart{}, time.Now(), nil); err != nil {
		return "", fmt.Errorf("logs of pod %s: %w", id, err)
	}
	tail := int64(200)
	limit := int64(max)
	data, err := k.pods().GetLogs(id, &corev1.PodLogOptions{Container: podContainer, TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of pod %s: %w", id, err)
	}
	return string(data), nil
}

var _ Runtime = (*Kubernetes)(nil)
