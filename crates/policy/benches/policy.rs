//! The policy validator's added time per container: one ValidateContainerAdjustment
//! request (three plugins, eleven owned fields) through `PolicyValidator` with a
//! 50-rule policy and through the default validator, in the same run.
//!
//! Run with `cargo bench -p nri-policy --bench policy`. Criterion measures both
//! (its `time:` line is [low, estimate, high] of the mean); then a second pass
//! times `NRI_POLICY_BENCH_ITERS` single calls of each (default 20000) and prints
//! the median and the 99th percentile, and the difference at the median.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use nri_api::{
    Container, ContainerAdjustment, Field, FieldOwners, KeyValue, LinuxContainerAdjustment,
    LinuxCpu, LinuxMemory, LinuxResources, Mount, OptionalInt64, OwningPlugins, PluginInstance,
    PodSandbox, ValidateContainerAdjustmentRequest,
};
use nri_policy::{Policy, PolicyValidator};
use nri_validator::{DefaultValidator, DefaultValidatorConfig};

const DEFAULT_WORDS: &str = "rejectOCIHookAdjustment: true\nrejectNamespaceAdjustment: true\n\
rejectSysctlAdjustment: true\nrequiredPlugins: [cpu-manager]\n";

/// 50 rules: three that decide this request (one per vendor), 47 scoped to
/// other plugins, namespaces or containers, with every kind of field class.
fn policy_text() -> String {
    let mut t = format!("mode: enforce\ndefault: deny\n{DEFAULT_WORDS}rules:\n");
    t.push_str(
        "  - name: cpu-manager\n    plugins: {names: [cpu-manager], index: {min: 10, max: 19}}\n    \
         allow:\n      resources: {cpus: {within: 0-63}, mems: {within: 0-1}, memory: {max: 64Gi}}\n      \
         annotations: ['cpu-manager.acme.io/*']\n",
    );
    t.push_str(
        "  - name: storage\n    plugins: {glob: 'storage-*'}\n    workload: {namespaces: [payments, 'team-*']}\n    \
         allow:\n      mounts: [{sources: [/var/lib/storage], types: [bind], access: rw}]\n      env: ['STORAGE_*']\n",
    );
    t.push_str(
        "  - name: observability\n    plugins: {names: [obs]}\n    allow:\n      env: ['OTEL_*']\n      \
         annotations: ['obs.example.com/*']\n    deny:\n      env: [LD_PRELOAD]\n",
    );
    for i in 0..47 {
        let spec = match i % 6 {
            0 => "allow: {devices: ['/dev/nvidia*'], cdiDevices: ['nvidia.com/gpu=*']}",
            1 => "deny: {mounts: [{sources: [/], access: rw}]}",
            2 => "allow: {sysctls: ['net.ipv4.*'], rlimits: {RLIMIT_NOFILE: {max: 65536}}}",
            3 => "allow: {hooks: ['/usr/libexec/oci/hooks.d/*'], oomScoreAdj: {min: -500, max: 1000}}",
            4 => "allow: {rdtClasses: [gold, silver], blockioClasses: ['*'], unified: ['memory.*']}",
            _ => "deny: {env: ['AWS_*'], namespaces: [network]}",
        };
        let scope = match i % 3 {
            0 => format!("plugins: {{names: [vendor-{i}]}}"),
            1 => format!("workload: {{namespaces: [ns-{i}], containers: ['job-*']}}"),
            _ => format!(
                "plugins: {{glob: 'other-{i}-*'}}\n    workload: {{podLabels: {{app: x{i}}}}}"
            ),
        };
        t.push_str(&format!("  - name: filler-{i}\n    {scope}\n    {spec}\n"));
    }
    t
}

fn request() -> ValidateContainerAdjustmentRequest {
    let mut owners = FieldOwners::default();
    let mut key = |field: Field, key: &str, owner: &str| {
        owners
            .compound
            .entry(field as i32)
            .or_default()
            .owners
            .insert(key.into(), owner.into());
    };
    key(
        Field::Annotations,
        "cpu-manager.acme.io/cpus",
        "10-cpu-manager",
    );
    key(Field::Annotations, "obs.example.com/trace", "30-obs");
    key(Field::Env, "STORAGE_ROOT", "20-storage-csi");
    key(Field::Env, "OTEL_SERVICE_NAME", "30-obs");
    key(Field::Env, "OTEL_EXPORTER", "30-obs");
    key(Field::Mounts, "/data", "20-storage-csi");
    key(Field::Mounts, "/cache", "20-storage-csi");
    owners
        .simple
        .insert(Field::CpuSetCpUs as i32, "10-cpu-manager".into());
    owners
        .simple
        .insert(Field::CpuSetMems as i32, "10-cpu-manager".into());
    owners
        .simple
        .insert(Field::MemLimit as i32, "10-cpu-manager".into());
    owners
        .simple
        .insert(Field::CpuShares as i32, "10-cpu-manager".into());
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: v.into(),
    };
    let bind = |d: &str, s: &str| Mount {
        destination: d.into(),
        source: s.into(),
        r#type: "bind".into(),
        options: vec!["rbind".into(), "rw".into()],
    };
    ValidateContainerAdjustmentRequest {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "shop".into(),
            namespace: "payments".into(),
            labels: [("app".to_string(), "shop".to_string())].into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: "ctr0".into(),
            name: "web".into(),
            ..Default::default()
        }),
        adjust: Some(ContainerAdjustment {
            annotations: [
                ("cpu-manager.acme.io/cpus".to_string(), "0-3".to_string()),
                ("obs.example.com/trace".to_string(), "on".to_string()),
            ]
            .into(),
            env: vec![
                kv("STORAGE_ROOT", "/data"),
                kv("OTEL_SERVICE_NAME", "web"),
                kv("OTEL_EXPORTER", "otlp"),
            ],
            mounts: vec![
                bind("/data", "/var/lib/storage/vol-1"),
                bind("/cache", "/var/lib/storage/cache"),
            ],
            linux: Some(LinuxContainerAdjustment {
                resources: Some(LinuxResources {
                    cpu: Some(LinuxCpu {
                        cpus: "0-3".into(),
                        mems: "0".into(),
                        shares: Some(nri_api::OptionalUInt64 { value: 1024 }),
                        ..Default::default()
                    }),
                    memory: Some(LinuxMemory {
                        limit: Some(OptionalInt64 { value: 1 << 30 }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        owners: Some(OwningPlugins {
            owners: [("ctr0".to_string(), owners)].into(),
        }),
        plugins: ["10-cpu-manager", "20-storage-csi", "30-obs"]
            .iter()
            .map(|q| {
                let (i, n) = q.split_once('-').unwrap();
                PluginInstance {
                    name: n.into(),
                    index: i.into(),
                }
            })
            .collect(),
        ..Default::default()
    }
}

fn validators() -> (PolicyValidator, DefaultValidator) {
    let policy = Policy::from_yaml_str(&policy_text(), "bench.yaml").unwrap();
    assert_eq!(policy.rules.len(), 50);
    let default =
        DefaultValidator::new(DefaultValidatorConfig::from_yaml_str(DEFAULT_WORDS).unwrap());
    (PolicyValidator::new(policy), default)
}

/// `req` without its owner of ctr0's CPU shares.
fn without_cpu_shares(
    mut req: ValidateContainerAdjustmentRequest,
) -> ValidateContainerAdjustmentRequest {
    req.owners
        .as_mut()
        .unwrap()
        .owners
        .get_mut("ctr0")
        .unwrap()
        .simple
        .remove(&(Field::CpuShares as i32));
    req
}

fn bench(c: &mut Criterion) {
    let (policy, default) = validators();
    let req = request();
    // CpuShares is owned but no rule allows it: refused under default deny.
    // Leave it out of the measured request so both validators accept.
    let req_ok = without_cpu_shares(req.clone());
    assert!(policy.validate(&req_ok).is_ok());
    assert!(policy.validate(&req).is_err());
    assert!(default.validate(&req_ok).is_ok());
    let mut g = c.benchmark_group("validate");
    g.bench_function("default validator", |b| {
        b.iter(|| default.validate(black_box(&req_ok)))
    });
    g.bench_function("policy validator, 50 rules", |b| {
        b.iter(|| policy.validate(black_box(&req_ok)))
    });
    g.bench_function("policy validator, 50 rules, refusing", |b| {
        b.iter(|| policy.validate(black_box(&req)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = bench
}

/// Median and 99th percentile of `iters` single calls, in µs.
fn percentiles(iters: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..iters / 10 {
        f();
    }
    let mut t: Vec<Duration> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(t[iters / 2]), us(t[iters * 99 / 100]))
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();

    let iters: usize = std::env::var("NRI_POLICY_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 100)
        .unwrap_or(20_000);
    let (policy, default) = validators();
    let req = without_cpu_shares(request());
    let (dm, dp) = percentiles(iters, || {
        let _ = black_box(default.validate(black_box(&req)));
    });
    let (pm, pp) = percentiles(iters, || {
        let _ = black_box(policy.validate(black_box(&req)));
    });
    // As a runtime's builtin runs it: keeping what the audit record is made of.
    let (am, ap) = percentiles(iters, || {
        let _ = black_box(policy.validate_audited(black_box(&req)));
    });
    println!();
    println!("per container, {iters} calls each (11 owned fields, 3 plugins, 50 rules):");
    println!("{:<28} {:>10} {:>10}", "", "median", "p99");
    println!("{:<28} {:>7.2} us {:>7.2} us", "default validator", dm, dp);
    println!(
        "{:<28} {:>7.2} us {:>7.2} us",
        "policy validator (50 rules)", pm, pp
    );
    println!(
        "{:<28} {:>7.2} us {:>7.2} us",
        "  keeping its audit entry", am, ap
    );
    println!(
        "added by the policy validator at the median: {:.2} us (goal: under 20 us)",
        pm - dm
    );
}
