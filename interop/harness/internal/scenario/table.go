package scenario

import (
	"sort"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Table is the runtime's in-memory view of pods and containers. It is safe
// for concurrent use: the adaptation calls SyncFn and UpdateFn from its own
// goroutines while steps are replayed.
type Table struct {
	mu         sync.Mutex
	defPods    map[string]*api.PodSandbox
	defCtrs    map[string]*api.Container
	pods       map[string]*api.PodSandbox
	containers map[string]*api.Container
	podOrder   []string
	ctrOrder   []string
}

// NewTable builds the initial table from a scenario.
func NewTable(s *Scenario) *Table {
	created, createdCtrs := s.Created()
	t := &Table{
		defPods:    map[string]*api.PodSandbox{},
		defCtrs:    map[string]*api.Container{},
		pods:       map[string]*api.PodSandbox{},
		containers: map[string]*api.Container{},
	}
	for _, p := range s.Pods {
		t.defPods[p.Id] = p
		t.podOrder = append(t.podOrder, p.Id)
		if !created[p.Id] {
			t.pods[p.Id] = clonePod(p)
		}
	}
	for _, c := range s.Containers {
		t.defCtrs[c.Id] = c
		t.ctrOrder = append(t.ctrOrder, c.Id)
		if !createdCtrs[c.Id] {
			t.containers[c.Id] = cloneCtr(c)
		}
	}
	return t
}

func clonePod(p *api.PodSandbox) *api.PodSandbox { return proto.Clone(p).(*api.PodSandbox) }
func cloneCtr(c *api.Container) *api.Container   { return proto.Clone(c).(*api.Container) }

// Snapshot returns copies of the pods and containers currently in the table,
// in scenario order.
func (t *Table) Snapshot() ([]*api.PodSandbox, []*api.Container) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pods := []*api.PodSandbox{}
	for _, id := range t.podOrder {
		if p, ok := t.pods[id]; ok {
			pods = append(pods, clonePod(p))
		}
	}
	ctrs := []*api.Container{}
	for _, id := range t.ctrOrder {
		if c, ok := t.containers[id]; ok {
			ctrs = append(ctrs, cloneCtr(c))
		}
	}
	return pods, ctrs
}

// Pod returns a copy of the pod: the table entry if present, else the
// scenario definition, else a bare pod with only the id set.
func (t *Table) Pod(id string) *api.PodSandbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pods[id]; ok {
		return clonePod(p)
	}
	if p, ok := t.defPods[id]; ok {
		return clonePod(p)
	}
	return &api.PodSandbox{Id: id}
}

// Container returns a copy of the container (table entry, else definition,
// else a bare container with only the id set) and the pod it belongs to.
func (t *Table) Container(id string) (*api.PodSandbox, *api.Container) {
	t.mu.Lock()
	c, ok := t.containers[id]
	if !ok {
		c, ok = t.defCtrs[id]
	}
	if !ok {
		c = &api.Container{Id: id}
	}
	c = cloneCtr(c)
	t.mu.Unlock()
	return t.Pod(c.PodSandboxId), c
}

// AddPod puts the pod into the table.
func (t *Table) AddPod(p *api.PodSandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods[p.Id] = clonePod(p)
	t.ensureOrder(&t.podOrder, p.Id)
}

// RemovePod drops the pod from the table.
func (t *Table) RemovePod(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, id)
}

// AddContainer puts the container into the table.
func (t *Table) AddContainer(c *api.Container) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.containers[c.Id] = cloneCtr(c)
	t.ensureOrder(&t.ctrOrder, c.Id)
}

// RemoveContainer drops the container from the table.
func (t *Table) RemoveContainer(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.containers, id)
}

// SetState changes the state of a container in the table.
func (t *Table) SetState(id string, state api.ContainerState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.containers[id]; ok {
		c.State = state
	}
}

// Has reports whether the container is in the table.
func (t *Table) Has(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.containers[id]
	return ok
}

// SetResources replaces the Linux resources of a container in the table.
func (t *Table) SetResources(id string, res *api.LinuxResources) {
	if res == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.containers[id]
	if !ok {
		return
	}
	if c.Linux == nil {
		c.Linux = &api.LinuxContainer{}
	}
	c.Linux.Resources = proto.Clone(res).(*api.LinuxResources)
}

// ApplyUpdates applies container updates to the table (replacing the Linux
// resources of each updated container) and returns the updates that failed:
// those naming a container that is not in the table or listed in fail.
func (t *Table) ApplyUpdates(updates []*api.ContainerUpdate, fail map[string]bool) []*api.ContainerUpdate {
	failed := []*api.ContainerUpdate{}
	for _, u := range updates {
		if u == nil {
			continue
		}
		if fail[u.ContainerId] || !t.Has(u.ContainerId) {
			failed = append(failed, u)
			continue
		}
		if u.Linux != nil {
			t.SetResources(u.ContainerId, u.Linux.Resources)
		}
	}
	return failed
}

func (t *Table) ensureOrder(order *[]string, id string) {
	for _, o := range *order {
		if o == id {
			return
		}
	}
	*order = append(*order, id)
}

// SortedKeys returns the keys of a set in ascending order.
func SortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
