package main

import (
	"fmt"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

// specGen is a small stand-in for the runtime-tools generator: it implements
// the interface the NRI generator wraps directly on an *rspec.Spec, with the
// same semantics (replace-or-append by key, remove first match, create
// intermediate objects on demand).
type specGen struct {
	spec *rspec.Spec
}

func (g *specGen) Spec() *rspec.Spec { return g.spec }

func (g *specGen) process() *rspec.Process {
	if g.spec.Process == nil {
		g.spec.Process = &rspec.Process{}
	}
	return g.spec.Process
}

func (g *specGen) linux() *rspec.Linux {
	if g.spec.Linux == nil {
		g.spec.Linux = &rspec.Linux{}
	}
	return g.spec.Linux
}

func (g *specGen) resources() *rspec.LinuxResources {
	l := g.linux()
	if l.Resources == nil {
		l.Resources = &rspec.LinuxResources{}
	}
	return l.Resources
}

func (g *specGen) cpu() *rspec.LinuxCPU {
	r := g.resources()
	if r.CPU == nil {
		r.CPU = &rspec.LinuxCPU{}
	}
	return r.CPU
}

func (g *specGen) memory() *rspec.LinuxMemory {
	r := g.resources()
	if r.Memory == nil {
		r.Memory = &rspec.LinuxMemory{}
	}
	return r.Memory
}

func (g *specGen) hooks() *rspec.Hooks {
	if g.spec.Hooks == nil {
		g.spec.Hooks = &rspec.Hooks{}
	}
	return g.spec.Hooks
}

func (g *specGen) AddAnnotation(key, value string) {
	if g.spec.Annotations == nil {
		g.spec.Annotations = map[string]string{}
	}
	g.spec.Annotations[key] = value
}

func (g *specGen) RemoveAnnotation(key string) {
	delete(g.spec.Annotations, key)
}

func (g *specGen) AddDevice(device rspec.LinuxDevice) {
	l := g.linux()
	for i := range l.Devices {
		if l.Devices[i].Path == device.Path {
			l.Devices[i] = device
			return
		}
	}
	l.Devices = append(l.Devices, device)
}

func (g *specGen) RemoveDevice(path string) {
	if g.spec.Linux == nil {
		return
	}
	devs := g.spec.Linux.Devices
	for i := range devs {
		if devs[i].Path == path {
			g.spec.Linux.Devices = append(devs[:i], devs[i+1:]...)
			return
		}
	}
}

var namespaceTypes = map[string]rspec.LinuxNamespaceType{
	"network": rspec.NetworkNamespace,
	"pid":     rspec.PIDNamespace,
	"mount":   rspec.MountNamespace,
	"ipc":     rspec.IPCNamespace,
	"uts":     rspec.UTSNamespace,
	"user":    rspec.UserNamespace,
	"cgroup":  rspec.CgroupNamespace,
	"time":    rspec.TimeNamespace,
}

func nsType(ns string) (rspec.LinuxNamespaceType, error) {
	if t, ok := namespaceTypes[ns]; ok {
		return t, nil
	}
	return "", fmt.Errorf("unrecognized namespace %q", ns)
}

func (g *specGen) AddOrReplaceLinuxNamespace(ns, path string) error {
	t, err := nsType(ns)
	if err != nil {
		return err
	}
	l := g.linux()
	for i := range l.Namespaces {
		if l.Namespaces[i].Type == t {
			l.Namespaces[i].Path = path
			return nil
		}
	}
	l.Namespaces = append(l.Namespaces, rspec.LinuxNamespace{Type: t, Path: path})
	return nil
}

func (g *specGen) RemoveLinuxNamespace(ns string) error {
	t, err := nsType(ns)
	if err != nil {
		return err
	}
	if g.spec.Linux == nil {
		return nil
	}
	nss := g.spec.Linux.Namespaces
	for i := range nss {
		if nss[i].Type == t {
			g.spec.Linux.Namespaces = append(nss[:i], nss[i+1:]...)
			return nil
		}
	}
	return nil
}

func (g *specGen) AddPreStartHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Prestart = append(hk.Prestart, h) //nolint:staticcheck
}

func (g *specGen) AddPostStartHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Poststart = append(hk.Poststart, h)
}

func (g *specGen) AddPostStopHook(h rspec.Hook) {
	hk := g.hooks()
	hk.Poststop = append(hk.Poststop, h)
}

func (g *specGen) AddProcessEnv(name, value string) {
	if name == "" {
		return
	}
	p := g.process()
	entry := name + "=" + value
	for i, e := range p.Env {
		if strings.HasPrefix(e, name+"=") {
			p.Env[i] = entry
			return
		}
	}
	p.Env = append(p.Env, entry)
}

func (g *specGen) ClearProcessEnv() {
	if g.spec.Process != nil {
		g.spec.Process.Env = []string{}
	}
}

func (g *specGen) AddLinuxResourcesDevice(allow bool, devType string, major, minor *int64, access string) {
	r := g.resources()
	r.Devices = append(r.Devices, rspec.LinuxDeviceCgroup{
		Allow: allow, Type: devType, Major: major, Minor: minor, Access: access,
	})
}

func (g *specGen) AddLinuxResourcesHugepageLimit(pageSize string, limit uint64) {
	r := g.resources()
	for i := range r.HugepageLimits {
		if r.HugepageLimits[i].Pagesize == pageSize {
			r.HugepageLimits[i].Limit = limit
			return
		}
	}
	r.HugepageLimits = append(r.HugepageLimits, rspec.LinuxHugepageLimit{Pagesize: pageSize, Limit: limit})
}

func (g *specGen) AddLinuxResourcesUnified(key, val string) {
	r := g.resources()
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[key] = val
}

func (g *specGen) AddMount(m rspec.Mount) {
	g.spec.Mounts = append(g.spec.Mounts, m)
}

func (g *specGen) AddLinuxSysctl(key, value string) {
	l := g.linux()
	if l.Sysctl == nil {
		l.Sysctl = map[string]string{}
	}
	l.Sysctl[key] = value
}

func (g *specGen) ClearMounts() { g.spec.Mounts = []rspec.Mount{} }

func (g *specGen) Mounts() []rspec.Mount { return g.spec.Mounts }

func (g *specGen) RemoveMount(dest string) {
	ms := g.spec.Mounts
	for i := range ms {
		if ms[i].Destination == dest {
			g.spec.Mounts = append(ms[:i], ms[i+1:]...)
			return
		}
	}
}

func (g *specGen) RemoveLinuxSysctl(key string) {
	if g.spec.Linux != nil {
		delete(g.spec.Linux.Sysctl, key)
	}
}

func (g *specGen) SetProcessArgs(args []string) { g.process().Args = args }

func (g *specGen) SetLinuxCgroupsPath(path string) { g.linux().CgroupsPath = path }

func (g *specGen) SetLinuxResourcesCPUCpus(cpus string) { g.cpu().Cpus = cpus }

func (g *specGen) SetLinuxResourcesCPUMems(mems string) { g.cpu().Mems = mems }

func (g *specGen) SetLinuxResourcesCPUPeriod(v uint64) { g.cpu().Period = &v }

func (g *specGen) SetLinuxResourcesCPUQuota(v int64) { g.cpu().Quota = &v }

func (g *specGen) SetLinuxResourcesCPURealtimePeriod(v uint64) { g.cpu().RealtimePeriod = &v }

func (g *specGen) SetLinuxResourcesCPURealtimeRuntime(v int64) { g.cpu().RealtimeRuntime = &v }

func (g *specGen) SetLinuxResourcesCPUShares(v uint64) { g.cpu().Shares = &v }

func (g *specGen) SetLinuxResourcesMemoryLimit(v int64) { g.memory().Limit = &v }

func (g *specGen) SetLinuxResourcesMemorySwap(v int64) { g.memory().Swap = &v }

func (g *specGen) SetLinuxRootPropagation(rp string) error {
	switch rp {
	case "", "private", "rprivate", "slave", "rslave", "shared", "rshared", "unbindable", "runbindable":
		g.linux().RootfsPropagation = rp
		return nil
	}
	return fmt.Errorf("rootfs-propagation %q must be empty or one of (r)private|(r)slave|(r)shared|(r)unbindable", rp)
}

func (g *specGen) SetProcessOOMScoreAdj(adj int) { g.process().OOMScoreAdj = &adj }
