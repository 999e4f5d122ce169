package container

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Warm pods (docs/kubernetes.md, "Warm pods"). Most of a pod's cold start
// is the cluster's, not ours: the kubelet polls for the pod's volumes
// (every 300 ms), builds the sandbox and its network, and reports the
// container running only at its next relist (every 1 s). An agent's
// runner does nothing until its first request arrives on stdin, and
// everything that differs between two agents of the same shape — the
// secrets, the gateway token, the prompt, the script, the nonce — travels
// in that request. So a pod can be started before anyone needs it, holding
// nothing secret, and claimed by the next agent container of exactly the
// same pod spec: the same image, command, limits, user and volumes (the
// same workspace), so a claim never gives an agent a volume its own pod
// would not have had. A claimed pod is the claimer's alone and is deleted
// when its container is done, like any other; it never goes back.

// LabelWarm marks a pod started ahead of time; a claimed pod keeps it.
const LabelWarm = "nanohost.warm"

// warmLabels are the labels a warm pod takes from the pod it copies: not
// the run, node or thread of the container that made it, which are not
// its claimer's.
var warmLabels = []string{LabelManaged, LabelHost, LabelOwner, LabelGroup, LabelKind, LabelNetwork}

// warmPool keeps up to size ready pods per pod shape.
type warmPool struct {
	k    *Kubernetes
	size int
	idle time.Duration

	mu      sync.Mutex
	ready   map[string][]*warmPod // by shape, oldest first
	filling map[string]int        // pods being started, by shape
	closed  bool
	wg      sync.WaitGroup
}

type warmPod struct {
	name  string
	timer *time.Timer // deletes the pod when nobody claimed it in time
}

func newWarmPool(k *Kubernetes, size int, idle time.Duration) *warmPool {
	return &warmPool{k: k, size: size, idle: idle, ready: map[string][]*warmPod{}, filling: map[string]int{}}
}

// podShape identifies the pods an agent container could equally run in:
// the pod spec and the labels a warm pod keeps, nothing else.
func podShape(p *corev1.Pod) string {
	kept := map[string]string{}
	for _, l := range warmLabels {
		if v, ok := p.Labels[l]; ok {
			kept[l] = v
		}
	}
	data, _ := json.Marshal(struct {
		Spec   corev1.PodSpec
		Labels map[string]string
	}{p.Spec, kept})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// take hands out a ready pod of the shape, which is then the caller's.
func (w *warmPool) take(shape string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := w.ready[shape]
	for len(pods) > 0 {
		p := pods[0]
		pods = pods[1:]
		if p.timer.Stop() { // else it is being deleted for idling
			w.ready[shape] = pods
			return p.name, true
		}
	}
	delete(w.ready, shape)
	return "", false
}

// fill starts pods of like's shape in the background until size are ready
// or starting.
func (w *warmPool) fill(shape string, like *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && len(w.ready[shape])+w.filling[shape] < w.size {
		w.filling[shape]++
		w.wg.Add(1)
		go w.start(shape, warmCopy(like))
	}
}

// warmCopy is like, under a name of its own and without the labels of the
// container it was made for.
func warmCopy(like *corev1.Pod) *corev1.Pod {
	var rnd [4]byte
	rand.Read(rnd[:])
	p := &corev1.Pod{Spec: *like.Spec.DeepCopy()}
	p.Name, p.Namespace = "nanohost-warm-"+hex.EncodeToString(rnd[:]), like.Namespace
	p.Labels = map[string]string{LabelWarm: "true"}
	exact := map[string]string{}
	var all map[string]string
	json.Unmarshal([]byte(like.Annotations[annotationLabels]), &all)
	for _, l := range warmLabels {
		if v, ok := like.Labels[l]; ok {
			p.Labels[l] = v
		}
		if v, ok := all[l]; ok {
			exact[l] = v
		}
	}
	data, _ := json.Marshal(exact)
	p.Annotations = map[string]string{annotationLabels: string(data)}
	return p
}

func (w *warmPool) start(shape string, pod *corev1.Pod) {
	defer w.wg.Done()
	k := w.k
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.StartTimeout)
	defer cancel()
	_, err := k.pods().Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		var trace PodStart
		err = k.waitRunning(ctx, pod.Name, podImage(pod), &trace, time.Now(), nil)
		if err != nil {
			k.removeQuietly(pod.Name)
		}
	}
	if err != nil {
		// Not retried: the next container of the shape starts cold and
		// says what is wrong, as it would without warm pods.
		k.log.Warn("a warm pod did not start", "pod", pod.Name, "err", err)
	}
	w.mu.Lock()
	w.filling[shape]--
	if w.filling[shape] == 0 {
		delete(w.filling, shape)
	}
	closed := w.closed
	if err == nil && !closed {
		p := &warmPod{name: pod.Name}
		p.timer = time.AfterFunc(w.idle, func() { w.expire(shape, p) })
		w.ready[shape] = append(w.ready[shape], p)
	}
	w.mu.Unlock()
	if err == nil && closed {
		k.removeQuietly(pod.Name)
	}
}

// expire deletes a pod nobody claimed in time.
func (w *warmPool) expire(shape string, p *warmPod) {
	w.mu.Lock()
	pods := w.ready[shape]
	for i, q := range pods {
		if q == p {
			w.ready[shape] = append(pods[:i:i], pods[i+1:]...)
			break
		}
	}
	if len(w.ready[shape]) == 0 {
		delete(w.ready, shape)
	}
	w.mu.Unlock()
	w.k.removeQuietly(p.name)
}

// close deletes the ready pods, and those still starting once they are up.
func (w *warmPool) close() {
	w.mu.Lock()
	w.closed = true
	var names []string
	for _, pods := range w.ready {
		for _, p := range pods {
			if p.timer.Stop() {
				names = append(names, p.name)
			}
		}
	}
	w.ready = map[string][]*warmPod{}
	w.mu.Unlock()
	for _, n := range names {
		w.k.removeQuietly(n)
	}
	w.wg.Wait()
}

func podImage(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	return p.Spec.Containers[0].Image
}

// readyCount and fillingCount are how many warm pods are ready, and
// starting (tests, diagnostics).
func (w *warmPool) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, pods := range w.ready {
		n += len(pods)
	}
	return n
}

func (w *warmPool) fillingCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.filling {
		n += c
	}
	return n
}
