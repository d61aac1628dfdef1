//! Differential test: our default validator against the reference one.
//!
//! `tests/go` holds a small Go program that runs the default validator of
//! `github.com/containerd/nri` over a list of cases. This test builds it,
//! feeds it hand-written and pseudo-random cases, and requires the same
//! verdict and the same error text from both implementations.
//!
//! Two things are kept out of the comparison on purpose:
//! * the reference lists namespace owners and sysctl owners in random map
//!   order, so the generated cases have at most one owned namespace, and all
//!   owned sysctls of a case share one owner (the text is then the same in
//!   any order);
//! * for an unreadable required-plugins annotation, only the part before the
//!   YAML parser's own message is compared (the parsers word errors
//!   differently); both must refuse.
//!
//! The reference panics on requests without a container or without owners
//! while an adjustment is present; such requests are not generated.
//!
//! A Go toolchain is required: the test fails if `go` cannot be run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nri_api::gofmt::quote;
use nri_api::security_profile::ProfileType;
use nri_api::{
    CompoundFieldOwners, Container, ContainerAdjustment, Field, FieldOwners, LinuxContainer,
    LinuxContainerAdjustment, OwningPlugins, PluginInstance, PodSandbox, SecurityProfile,
    ValidateContainerAdjustmentRequest,
};
use nri_validator::{
    DefaultValidator, DefaultValidatorConfig, ValidationError, REQUIRED_PLUGINS_ANNOTATION,
};
use serde_json::json;

const CTR_ID: &str = "ctr-id-0";
const CTR_NAME: &str = "ctr0";
const TOLERATE: &str = "tolerate-missing-plugins.noderesource.dev";
const RANDOM_CASES: usize = 200;

struct Case {
    what: String,
    config: DefaultValidatorConfig,
    request: ValidateContainerAdjustmentRequest,
}

// ---------------------------------------------------------------------------
// Running the reference.

fn go_binary() -> PathBuf {
    if let Some(go) = std::env::var_os("GO") {
        return go.into();
    }
    let fallback = Path::new("/usr/local/go/bin/go");
    let on_path = Command::new("go").arg("version").output().is_ok();
    if !on_path && fallback.exists() {
        return fallback.into();
    }
    "go".into()
}

fn build_reference() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nri-validator-difftest");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let go = go_binary();
    let output = Command::new(&go)
        .args(["build", "-mod=readonly", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {go:?} ({e}): this test needs a Go toolchain (1.24 or newer) \
                 on PATH or named by $GO"
            )
        });
    assert!(
        output.status.success(),
        "building the reference validator program failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

fn run_reference(binary: &Path, cases: &[Case]) -> Vec<String> {
    let input: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| json!({"config": c.config, "request": c.request}))
        .collect();
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the reference validator program");
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(serde_json::to_string(&input).unwrap().as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the reference validator program failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdicts: Vec<String> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts.len(), cases.len());
    verdicts
}

/// Whether our result says the same as the reference's text.
fn agrees(ours: &Result<(), ValidationError>, go: &str) -> bool {
    match ours {
        Ok(()) => go.is_empty(),
        Err(ValidationError::InvalidRequiredPluginsAnnotation { value, .. }) => {
            let prefix = format!(
                "invalid {REQUIRED_PLUGINS_ANNOTATION} annotation {}: ",
                quote(value)
            );
            go.starts_with(&prefix) && go.len() > prefix.len()
        }
        Err(err) => err.to_string() == go,
    }
}

// ---------------------------------------------------------------------------
// Building requests.

fn instance(index: &str, name: &str) -> PluginInstance {
    PluginInstance {
        name: name.into(),
        index: index.into(),
    }
}

fn base_request() -> ValidateContainerAdjustmentRequest {
    ValidateContainerAdjustmentRequest {
        pod: Some(PodSandbox {
            id: "pod-id-0".into(),
            name: "pod0".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: CTR_ID.into(),
            name: CTR_NAME.into(),
            pod_sandbox_id: "pod-id-0".into(),
            ..Default::default()
        }),
        adjust: Some(ContainerAdjustment::default()),
        owners: Some(OwningPlugins::default()),
        plugins: vec![instance("00", "default-validator")],
        ..Default::default()
    }
}

fn fields<'a>(req: &'a mut ValidateContainerAdjustmentRequest, id: &str) -> &'a mut FieldOwners {
    req.owners
        .get_or_insert_with(Default::default)
        .owners
        .entry(id.into())
        .or_default()
}

fn own_simple(req: &mut ValidateContainerAdjustmentRequest, id: &str, f: Field, owner: &str) {
    fields(req, id).simple.insert(f as i32, owner.into());
}

fn own_compound(
    req: &mut ValidateContainerAdjustmentRequest,
    id: &str,
    f: Field,
    key: &str,
    owner: &str,
) {
    fields(req, id)
        .compound
        .entry(f as i32)
        .or_default()
        .owners
        .insert(key.into(), owner.into());
}

fn set_profile(req: &mut ValidateContainerAdjustmentRequest, profile_type: Option<i32>) {
    req.container.as_mut().unwrap().linux = Some(LinuxContainer {
        seccomp_profile: profile_type.map(|t| SecurityProfile {
            profile_type: t,
            localhost_ref: if t == ProfileType::Localhost as i32 {
                "profiles/custom.json".into()
            } else {
                String::new()
            },
        }),
        ..Default::default()
    });
}

fn adjust_sysctl(req: &mut ValidateContainerAdjustmentRequest, key: &str) {
    req.adjust
        .get_or_insert_with(Default::default)
        .linux
        .get_or_insert_with(LinuxContainerAdjustment::default)
        .sysctl
        .insert(key.into(), "1".into());
}

fn annotate(req: &mut ValidateContainerAdjustmentRequest, key: &str, value: &str) {
    req.pod
        .get_or_insert_with(Default::default)
        .annotations
        .insert(key.into(), value.into());
}

fn all_rules() -> DefaultValidatorConfig {
    DefaultValidatorConfig {
        enable: true,
        reject_oci_hook_adjustment: true,
        reject_runtime_default_seccomp_adjustment: true,
        reject_unconfined_seccomp_adjustment: true,
        reject_custom_seccomp_adjustment: true,
        reject_namespace_adjustment: true,
        reject_sysctl_adjustment: true,
        required_plugins: Vec::new(),
        tolerate_missing_plugins_annotation: TOLERATE.into(),
    }
}

// ---------------------------------------------------------------------------
// Hand-written cases: one or more per rule and message.

fn hand_written() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |what: &str, config: DefaultValidatorConfig, request| {
        cases.push(Case {
            what: what.into(),
            config,
            request,
        })
    };

    add(
        "empty request, default config",
        DefaultValidatorConfig::default(),
        base_request(),
    );
    add("empty request, all rules", all_rules(), base_request());

    let mut r = base_request();
    own_simple(&mut r, CTR_ID, Field::OciHooks, "10-hooks");
    add("hooks, one owner", all_rules(), r.clone());
    add(
        "hooks, rule off",
        DefaultValidatorConfig::default(),
        r.clone(),
    );
    r.adjust = None;
    add("hooks, no adjust", all_rules(), r);

    let mut r = base_request();
    own_simple(&mut r, CTR_ID, Field::OciHooks, "10-a,20-b");
    add("hooks, two owners", all_rules(), r);

    let mut r = base_request();
    own_simple(&mut r, CTR_ID, Field::OciHooks, "-10-a");
    add("hooks, cleared", all_rules(), r);

    let mut r = base_request();
    own_simple(&mut r, "other-ctr", Field::OciHooks, "10-a");
    add("hooks of another container", all_rules(), r);

    for (what, profile) in [
        ("no linux", None),
        ("no profile", Some(None)),
        ("unconfined", Some(Some(ProfileType::Unconfined as i32))),
        (
            "runtime default",
            Some(Some(ProfileType::RuntimeDefault as i32)),
        ),
        ("localhost", Some(Some(ProfileType::Localhost as i32))),
        ("unknown type", Some(Some(9))),
    ] {
        let mut r = base_request();
        if let Some(p) = profile {
            set_profile(&mut r, p);
        }
        own_simple(&mut r, CTR_ID, Field::SeccompPolicy, "20-sec");
        add(
            &format!("seccomp {what}, all rules"),
            all_rules(),
            r.clone(),
        );
        for (name, cfg) in [
            (
                "unconfined",
                DefaultValidatorConfig {
                    reject_unconfined_seccomp_adjustment: true,
                    ..Default::default()
                },
            ),
            (
                "runtime default",
                DefaultValidatorConfig {
                    reject_runtime_default_seccomp_adjustment: true,
                    ..Default::default()
                },
            ),
            (
                "custom",
                DefaultValidatorConfig {
                    reject_custom_seccomp_adjustment: true,
                    ..Default::default()
                },
            ),
        ] {
            add(&format!("seccomp {what}, only {name} rule"), cfg, r.clone());
        }
    }

    let mut r = base_request();
    own_compound(&mut r, CTR_ID, Field::Namespace, "network", "30-net");
    add("namespace, one owner", all_rules(), r.clone());
    add("namespace, rule off", DefaultValidatorConfig::default(), r);

    let mut r = base_request();
    fields(&mut r, CTR_ID)
        .compound
        .insert(Field::Namespace as i32, CompoundFieldOwners::default());
    add("namespace, empty owner map", all_rules(), r);

    let mut r = base_request();
    for key in ["kernel.shmmax", "net.core.somaxconn", "vm.swappiness"] {
        adjust_sysctl(&mut r, key);
        own_compound(&mut r, CTR_ID, Field::Sysctl, key, "40-sys");
    }
    adjust_sysctl(&mut r, "fs.file-max");
    add(
        "sysctl, three owned keys one unowned",
        all_rules(),
        r.clone(),
    );
    r.adjust.as_mut().unwrap().linux = None;
    add("sysctl owned but no linux adjustment", all_rules(), r);

    let mut r = base_request();
    adjust_sysctl(&mut r, "kernel.x");
    own_compound(&mut r, CTR_ID, Field::Sysctl, "kernel.x", "40-sys");
    add("sysctl, rule off", DefaultValidatorConfig::default(), r);

    let mut cfg = DefaultValidatorConfig {
        required_plugins: vec!["res".into()],
        ..Default::default()
    };
    add("required, one missing", cfg.clone(), base_request());
    cfg.required_plugins = vec!["a".into(), "default-validator".into(), "10-b".into()];
    add("required, two missing", cfg.clone(), base_request());
    let mut r = base_request();
    r.plugins.push(instance("10", "b"));
    r.plugins.push(instance("20", "a"));
    add("required, all present", cfg.clone(), r.clone());
    r.adjust = None;
    r.owners = None;
    r.container = None;
    add("required, no container", cfg.clone(), r);

    let mut r = base_request();
    r.adjust = None;
    r.owners = None;
    annotate(&mut r, REQUIRED_PLUGINS_ANNOTATION, r#"["x", "y"]"#);
    add("required from JSON annotation", cfg.clone(), r.clone());
    annotate(
        &mut r,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/pod"),
        "[ p ]",
    );
    add("required, pod scope beats plain", cfg.clone(), r.clone());
    annotate(
        &mut r,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/container.{CTR_NAME}"),
        "- c1\n- c2\n",
    );
    add(
        "required, container scope beats pod",
        cfg.clone(),
        r.clone(),
    );
    for value in [
        "",
        "[]",
        "null",
        "~",
        "[a, ~, b]",
        "[1, true, 0x1F]",
        "[a]\n---\n[b]\n",
        "# just a comment",
        "plugin",
        "{not: a list}",
        "[[nested]]",
        "[unterminated",
        "'quoted'",
    ] {
        let mut r = base_request();
        annotate(&mut r, REQUIRED_PLUGINS_ANNOTATION, value);
        add(
            &format!("required annotation {value:?}"),
            DefaultValidatorConfig::default(),
            r,
        );
    }

    for value in [
        "true", "1", "t", "T", "TRUE", "True", "false", "0", "f", "F", "FALSE", "False", "yes", "",
        " true", "tRuE",
    ] {
        let mut cfg = all_rules();
        cfg.required_plugins = vec!["res".into()];
        let mut r = base_request();
        annotate(&mut r, TOLERATE, value);
        add(&format!("tolerate {value:?}"), cfg, r);
    }

    let mut cfg = all_rules();
    cfg.required_plugins = vec!["res".into()];
    let mut r = base_request();
    annotate(&mut r, TOLERATE, "true");
    annotate(&mut r, &format!("{TOLERATE}/container.{CTR_NAME}"), "false");
    add(
        "tolerate, container scope false beats pod true",
        cfg.clone(),
        r.clone(),
    );
    cfg.tolerate_missing_plugins_annotation = String::new();
    add("tolerate annotation not configured", cfg, r);

    let mut r = base_request();
    own_simple(&mut r, CTR_ID, Field::OciHooks, "1-h");
    own_simple(&mut r, CTR_ID, Field::SeccompPolicy, "2-s");
    own_compound(&mut r, CTR_ID, Field::Namespace, "pid", "3-n");
    adjust_sysctl(&mut r, "kernel.x");
    own_compound(&mut r, CTR_ID, Field::Sysctl, "kernel.x", "5-x");
    let mut cfg = all_rules();
    cfg.required_plugins = vec!["4-r".into()];
    for step in 0..6 {
        add(&format!("rule order, step {step}"), cfg.clone(), r.clone());
        match step {
            0 => cfg.reject_oci_hook_adjustment = false,
            1 => cfg.reject_unconfined_seccomp_adjustment = false,
            2 => cfg.reject_namespace_adjustment = false,
            3 => cfg.required_plugins.clear(),
            4 => cfg.reject_sysctl_adjustment = false,
            _ => {}
        }
    }

    cases
}

// ---------------------------------------------------------------------------
// Pseudo-random cases.

/// SplitMix64: small, seedable, good enough to spread the cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const PLUGINS: [(&str, &str); 5] = [
    ("00", "default-validator"),
    ("10", "a"),
    ("20", "b"),
    ("30", "c"),
    ("40", "d"),
];
const REQUIRED_NAMES: [&str; 9] = [
    "a",
    "b",
    "c",
    "10-a",
    "21-b",
    "default-validator",
    "00-default-validator",
    "zz",
    "",
];
const OWNERS: [&str; 7] = [
    "10-a",
    "20-b",
    "30-c",
    "-10-a",
    "40-d",
    "10-a,20-b",
    "10-a,20-b,30-c",
];
const ANNOTATION_VALUES: [&str; 12] = [
    r#"["a"]"#,
    "[ b, zz ]",
    "- c\n- 10-a\n",
    "[]",
    "",
    "null",
    "[a, ~]",
    r#"["00-default-validator", "q"]"#,
    "{bad",
    "just-a-name",
    "[1, 2]",
    "'x'",
];
const TOLERATE_VALUES: [&str; 8] = ["true", "false", "1", "0", "T", "F", "maybe", ""];
const SCOPES: [&str; 4] = ["", "/pod", "/container.ctr0", "/container.other"];
const NAMESPACES: [&str; 4] = ["network", "pid", "ipc", "uts"];
const SYSCTLS: [&str; 4] = [
    "kernel.shmmax",
    "net.core.somaxconn",
    "vm.swappiness",
    "fs.file-max",
];

fn random_case(rng: &mut Rng, n: usize) -> Case {
    let config = DefaultValidatorConfig {
        enable: rng.chance(50),
        reject_oci_hook_adjustment: rng.chance(50),
        reject_runtime_default_seccomp_adjustment: rng.chance(50),
        reject_unconfined_seccomp_adjustment: rng.chance(50),
        reject_custom_seccomp_adjustment: rng.chance(50),
        reject_namespace_adjustment: rng.chance(50),
        reject_sysctl_adjustment: rng.chance(50),
        required_plugins: (0..rng.below(4))
            .map(|_| rng.pick(&REQUIRED_NAMES).to_string())
            .collect(),
        tolerate_missing_plugins_annotation: if rng.chance(60) {
            TOLERATE.into()
        } else {
            String::new()
        },
    };

    let mut req = base_request();
    req.plugins = PLUGINS
        .iter()
        .filter(|_| rng.chance(60))
        .map(|(i, n)| instance(i, n))
        .collect();

    // Without an adjustment the reference reads neither owners nor the
    // container id, so those may be absent too.
    if rng.chance(15) {
        req.adjust = None;
        if rng.chance(50) {
            req.owners = None;
        }
        if rng.chance(30) {
            req.container = None;
        }
    }

    if req.container.is_some() && rng.chance(80) {
        let profile = match rng.below(6) {
            0 => None,
            1 => Some(ProfileType::Unconfined as i32),
            2 => Some(ProfileType::Localhost as i32),
            3 => Some(7),
            _ => Some(ProfileType::RuntimeDefault as i32),
        };
        set_profile(&mut req, profile);
    }

    if req.owners.is_some() {
        let target = if rng.chance(85) { CTR_ID } else { "other-ctr" };
        if rng.chance(35) {
            own_simple(&mut req, target, Field::OciHooks, rng.pick(&OWNERS));
        }
        if rng.chance(40) {
            let owner = rng.pick(&OWNERS).to_string();
            own_simple(&mut req, target, Field::SeccompPolicy, &owner);
        }
        match rng.below(6) {
            0 => {
                fields(&mut req, target)
                    .compound
                    .insert(Field::Namespace as i32, CompoundFieldOwners::default());
            }
            1 | 2 => {
                let ns = rng.pick(&NAMESPACES).to_string();
                let owner = rng.pick(&OWNERS).to_string();
                own_compound(&mut req, target, Field::Namespace, &ns, &owner);
            }
            _ => {}
        }
        if rng.chance(30) {
            own_simple(&mut req, CTR_ID, Field::MemLimit, rng.pick(&OWNERS));
        }
        // Every owned sysctl of a case has the same owner (see the top).
        let sysctl_owner = rng.pick(&OWNERS).to_string();
        for key in SYSCTLS {
            let adjusted = req.adjust.is_some() && rng.chance(40);
            if adjusted {
                adjust_sysctl(&mut req, key);
            }
            if rng.chance(50) {
                own_compound(&mut req, target, Field::Sysctl, key, &sysctl_owner);
            }
        }
    }

    if rng.chance(50) {
        let scope = rng.pick(&SCOPES);
        let value = rng.pick(&ANNOTATION_VALUES).to_string();
        annotate(
            &mut req,
            &format!("{REQUIRED_PLUGINS_ANNOTATION}{scope}"),
            &value,
        );
    }
    if rng.chance(40) {
        let scope = rng.pick(&SCOPES);
        let value = rng.pick(&TOLERATE_VALUES).to_string();
        annotate(&mut req, &format!("{TOLERATE}{scope}"), &value);
    }
    if rng.chance(10) {
        req.pod = None;
    }

    Case {
        what: format!("random case {n}"),
        config,
        request: req,
    }
}

// ---------------------------------------------------------------------------

#[test]
fn rust_and_go_default_validators_agree() {
    let binary = build_reference();

    let mut cases = hand_written();
    let hand_written_count = cases.len();
    let mut rng = Rng(0x6e72_692d_7273_0001);
    cases.extend((0..RANDOM_CASES).map(|n| random_case(&mut rng, n)));

    let verdicts = run_reference(&binary, &cases);

    let mut mismatches = Vec::new();
    let mut rejected = 0;
    let mut seen = std::collections::BTreeSet::new();
    for (case, go) in cases.iter().zip(&verdicts) {
        let ours = DefaultValidator::new(case.config.clone()).validate(&case.request);
        if let Err(err) = &ours {
            rejected += 1;
            seen.insert(kind(err));
        }
        if !agrees(&ours, go) {
            mismatches.push(format!(
                "{}:\n  go:   {go:?}\n  rust: {:?}\n  case: {}",
                case.what,
                ours.as_ref().map_err(|e| e.to_string()),
                json!({"config": case.config, "request": case.request}),
            ));
        }
    }

    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ from the reference:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    // The generator must exercise both verdicts, not only one.
    assert!(hand_written_count >= 60, "{hand_written_count}");
    assert!(
        rejected > cases.len() / 5 && rejected < cases.len() * 4 / 5,
        "{rejected}"
    );
    assert_eq!(
        seen.len(),
        9,
        "not every kind of error was compared: {seen:?}"
    );
}

/// A name for each kind of error, seccomp split by profile kind.
fn kind(err: &ValidationError) -> String {
    match err {
        ValidationError::SeccompPolicyAdjustment { profile, .. } => format!("seccomp {profile:?}"),
        other => format!("{other:?}")
            .split([' ', '{'])
            .next()
            .unwrap_or("")
            .to_owned(),
    }
}
