//! The policy validator does everything the default validator does: every
//! scenario of the default validator's tests (`crates/validator`), and
//! pseudo-random ones, get the same verdict and the same text from
//! `PolicyValidator` with a policy file that holds the same configuration
//! words, alone or next to rules that allow every field.

use nri_api::security_profile::ProfileType;
use nri_api::{
    CompoundFieldOwners, Container, ContainerAdjustment, Field, FieldOwners, LinuxContainer,
    LinuxContainerAdjustment, OwningPlugins, PluginInstance, PodSandbox, SecurityProfile,
    ValidateContainerAdjustmentRequest,
};
use nri_policy::{Policy, PolicyValidator};
use nri_validator::{DefaultValidator, DefaultValidatorConfig, REQUIRED_PLUGINS_ANNOTATION};
use proptest::prelude::*;

const CTR: &str = "ctr0";
const NAME: &str = "ctr-name";

type Req = ValidateContainerAdjustmentRequest;

fn request() -> Req {
    Req {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "pod".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: CTR.into(),
            name: NAME.into(),
            ..Default::default()
        }),
        adjust: Some(ContainerAdjustment::default()),
        owners: Some(OwningPlugins::default()),
        plugins: vec![instance("00", "default-validator")],
        ..Default::default()
    }
}

fn instance(index: &str, name: &str) -> PluginInstance {
    PluginInstance {
        name: name.into(),
        index: index.into(),
    }
}

fn fields(req: &mut Req) -> &mut FieldOwners {
    req.owners
        .get_or_insert_with(Default::default)
        .owners
        .entry(CTR.into())
        .or_default()
}

fn simple(mut req: Req, field: Field, owner: &str) -> Req {
    fields(&mut req).simple.insert(field as i32, owner.into());
    req
}

fn compound(mut req: Req, field: Field, key: &str, owner: &str) -> Req {
    fields(&mut req)
        .compound
        .entry(field as i32)
        .or_default()
        .owners
        .insert(key.into(), owner.into());
    req
}

fn profile(mut req: Req, p: Option<i32>) -> Req {
    req.container.as_mut().unwrap().linux = Some(LinuxContainer {
        seccomp_profile: p.map(|t| SecurityProfile {
            profile_type: t,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    });
    req
}

fn sysctl(mut req: Req, key: &str, owner: Option<&str>) -> Req {
    req.adjust
        .get_or_insert_with(Default::default)
        .linux
        .get_or_insert_with(LinuxContainerAdjustment::default)
        .sysctl
        .insert(key.into(), "1".into());
    match owner {
        Some(o) => compound(req, Field::Sysctl, key, o),
        None => req,
    }
}

fn annotate(mut req: Req, key: &str, value: &str) -> Req {
    req.pod
        .as_mut()
        .unwrap()
        .annotations
        .insert(key.into(), value.into());
    req
}

fn with_plugins(mut req: Req, plugins: &[(&str, &str)]) -> Req {
    req.plugins
        .extend(plugins.iter().map(|(i, n)| instance(i, n)));
    req
}

fn no_adjust(mut req: Req) -> Req {
    req.adjust = None;
    req
}

fn cfg(f: impl FnOnce(&mut DefaultValidatorConfig)) -> DefaultValidatorConfig {
    let mut c = DefaultValidatorConfig::default();
    f(&mut c);
    c
}

fn everything_rejected() -> DefaultValidatorConfig {
    cfg(|c| {
        c.reject_oci_hook_adjustment = true;
        c.reject_runtime_default_seccomp_adjustment = true;
        c.reject_unconfined_seccomp_adjustment = true;
        c.reject_custom_seccomp_adjustment = true;
        c.reject_namespace_adjustment = true;
        c.reject_sysctl_adjustment = true;
    })
}

fn requiring(plugins: &[&str]) -> DefaultValidatorConfig {
    cfg(|c| {
        c.required_plugins = plugins.iter().map(|s| s.to_string()).collect();
        c.tolerate_missing_plugins_annotation = "tolerate-missing".into();
    })
}

/// Every scenario of the default validator's unit tests, as (what, config, request).
fn scenarios() -> Vec<(&'static str, DefaultValidatorConfig, Req)> {
    use ProfileType::*;
    let hooks = |o| simple(request(), Field::OciHooks, o);
    let sec = |p: Option<ProfileType>| {
        simple(
            profile(request(), p.map(|p| p as i32)),
            Field::SeccompPolicy,
            "10-sec",
        )
    };
    let only = |f: fn(&mut DefaultValidatorConfig)| cfg(f);
    let rp = REQUIRED_PLUGINS_ANNOTATION;
    let mut all_owned = simple(request(), Field::OciHooks, "10-a");
    all_owned = simple(all_owned, Field::SeccompPolicy, "10-a");
    all_owned = compound(all_owned, Field::Namespace, "network", "10-a");
    all_owned = sysctl(all_owned, "net.core.somaxconn", Some("10-a"));
    let mut other_ctr = request();
    other_ctr.owners.as_mut().unwrap().owners.insert(
        "other-ctr".into(),
        hooks("10-a").owners.unwrap().owners.remove(CTR).unwrap(),
    );
    let mut empty_ns = request();
    fields(&mut empty_ns)
        .compound
        .insert(Field::Namespace as i32, CompoundFieldOwners::default());
    let mut no_ctr = no_adjust(request());
    no_ctr.owners = None;
    let mut nothing = no_ctr.clone();
    nothing.container = None;
    nothing.pod = None;
    let mut unknown_profile = profile(request(), Some(7));
    unknown_profile = simple(unknown_profile, Field::SeccompPolicy, "10-sec");
    let mut missing_owners = simple(request(), Field::OciHooks, "10-a");
    missing_owners.owners = None;
    let sysctls = {
        let mut r = sysctl(request(), "vm.swappiness", Some("30-c"));
        r = sysctl(r, "kernel.shmmax", Some("10-a"));
        r = sysctl(r, "net.core.somaxconn", None);
        r = sysctl(r, "net.ipv4.ip_forward", Some("10-a"));
        compound(r, Field::Sysctl, "fs.file-max", "40-d")
    };
    let mut out = vec![
        (
            "default config accepts everything",
            DefaultValidatorConfig::default(),
            all_owned.clone(),
        ),
        (
            "nothing owned",
            everything_rejected(),
            profile(
                sysctl(request(), "net.core.somaxconn", None),
                Some(RuntimeDefault as i32),
            ),
        ),
        (
            "hooks single owner",
            only(|c| c.reject_oci_hook_adjustment = true),
            hooks("10-hooks"),
        ),
        (
            "hooks several owners",
            only(|c| c.reject_oci_hook_adjustment = true),
            hooks("10-a,20-b,30-c"),
        ),
        (
            "hooks rule off",
            DefaultValidatorConfig::default(),
            hooks("10-a"),
        ),
        (
            "hooks no adjust",
            only(|c| c.reject_oci_hook_adjustment = true),
            no_adjust(hooks("10-a")),
        ),
        (
            "hooks other container",
            only(|c| c.reject_oci_hook_adjustment = true),
            other_ctr,
        ),
        ("hooks cleared", everything_rejected(), hooks("-10-a")),
        (
            "seccomp unconfined",
            only(|c| c.reject_unconfined_seccomp_adjustment = true),
            sec(Some(Unconfined)),
        ),
        (
            "seccomp no profile",
            only(|c| c.reject_unconfined_seccomp_adjustment = true),
            sec(None),
        ),
        (
            "seccomp no linux",
            only(|c| c.reject_unconfined_seccomp_adjustment = true),
            simple(request(), Field::SeccompPolicy, "10-sec"),
        ),
        (
            "seccomp runtime default",
            only(|c| c.reject_runtime_default_seccomp_adjustment = true),
            sec(Some(RuntimeDefault)),
        ),
        (
            "seccomp custom",
            only(|c| c.reject_custom_seccomp_adjustment = true),
            sec(Some(Localhost)),
        ),
        (
            "seccomp unknown profile",
            everything_rejected(),
            unknown_profile,
        ),
        (
            "seccomp no adjust",
            everything_rejected(),
            no_adjust(simple(request(), Field::SeccompPolicy, "10-sec")),
        ),
        (
            "seccomp unowned",
            everything_rejected(),
            simple(request(), Field::MemLimit, "10-mem"),
        ),
        (
            "namespace single",
            only(|c| c.reject_namespace_adjustment = true),
            compound(request(), Field::Namespace, "network", "10-net"),
        ),
        (
            "namespace several",
            only(|c| c.reject_namespace_adjustment = true),
            compound(
                compound(
                    compound(request(), Field::Namespace, "pid", "20-pid"),
                    Field::Namespace,
                    "ipc",
                    "30-ipc",
                ),
                Field::Namespace,
                "network",
                "-10-net",
            ),
        ),
        (
            "namespace empty map",
            only(|c| c.reject_namespace_adjustment = true),
            empty_ns,
        ),
        (
            "namespace rule off",
            DefaultValidatorConfig::default(),
            compound(request(), Field::Namespace, "network", "10-net"),
        ),
        (
            "namespace no adjust",
            everything_rejected(),
            no_adjust(compound(request(), Field::Namespace, "network", "10-net")),
        ),
        ("required single missing", requiring(&["res"]), request()),
        (
            "required several missing",
            requiring(&["a", "default-validator", "10-b", "c"]),
            request(),
        ),
        (
            "required present",
            requiring(&["res", "10-res", "00-default-validator"]),
            with_plugins(request(), &[("10", "res")]),
        ),
        (
            "required qualified missing",
            requiring(&["20-res"]),
            with_plugins(request(), &[("10", "res")]),
        ),
        (
            "required without adjustment",
            requiring(&["res"]),
            no_ctr.clone(),
        ),
        (
            "required without container",
            requiring(&["res"]),
            nothing.clone(),
        ),
        (
            "nothing required without container",
            requiring(&[]),
            nothing,
        ),
        (
            "required from annotation",
            requiring(&["a"]),
            annotate(request(), rp, r#"["x", "y"]"#),
        ),
        (
            "required from annotation, present",
            requiring(&["a"]),
            with_plugins(
                annotate(request(), rp, r#"["x", "y"]"#),
                &[("10", "x"), ("20", "y")],
            ),
        ),
        (
            "annotation only, present",
            requiring(&[]),
            with_plugins(
                annotate(request(), rp, r#"["x", "y"]"#),
                &[("10", "x"), ("20", "y")],
            ),
        ),
        (
            "annotation flow list",
            DefaultValidatorConfig::default(),
            annotate(request(), &format!("{rp}/container.{NAME}"), "[ plugin ]"),
        ),
        (
            "annotation pod scope",
            DefaultValidatorConfig::default(),
            annotate(
                annotate(request(), rp, "[plain]"),
                &format!("{rp}/pod"),
                "[pod]",
            ),
        ),
        (
            "annotation container scope",
            DefaultValidatorConfig::default(),
            annotate(
                annotate(
                    annotate(
                        annotate(request(), rp, "[plain]"),
                        &format!("{rp}/pod"),
                        "[pod]",
                    ),
                    &format!("{rp}/container.{NAME}"),
                    "[ctr]",
                ),
                &format!("{rp}/container.other"),
                "[other]",
            ),
        ),
        (
            "annotation invalid",
            DefaultValidatorConfig::default(),
            annotate(request(), rp, "{not: a list}"),
        ),
        (
            "tolerate invalid",
            requiring(&[]),
            annotate(request(), "tolerate-missing", "yes"),
        ),
        (
            "tolerate scoped false",
            requiring(&["res"]),
            annotate(
                annotate(request(), "tolerate-missing", "true"),
                &format!("tolerate-missing/container.{NAME}"),
                "false",
            ),
        ),
        (
            "tolerate scoped true",
            requiring(&["res"]),
            annotate(
                annotate(
                    annotate(request(), "tolerate-missing", "true"),
                    &format!("tolerate-missing/container.{NAME}"),
                    "true",
                ),
                "tolerate-missing/pod",
                "false",
            ),
        ),
        (
            "tolerate not configured",
            cfg(|c| c.required_plugins = vec!["res".into()]),
            annotate(request(), "tolerate-missing", "true"),
        ),
        (
            "sysctl single",
            only(|c| c.reject_sysctl_adjustment = true),
            sysctl(request(), "net.ipv4.ip_forward", Some("10-net")),
        ),
        (
            "sysctl several",
            only(|c| c.reject_sysctl_adjustment = true),
            sysctls,
        ),
        (
            "sysctl no linux adjustment",
            everything_rejected(),
            compound(request(), Field::Sysctl, "a.b", "10-a"),
        ),
        (
            "sysctl rule off",
            DefaultValidatorConfig::default(),
            sysctl(request(), "a.b", Some("10-a")),
        ),
        ("missing owners", everything_rejected(), missing_owners),
    ];
    for value in ["true", "1", "t", "T", "TRUE", "True"] {
        out.push((
            "tolerate true",
            requiring(&["res"]),
            annotate(annotate(request(), "tolerate-missing", value), rp, "{"),
        ));
    }
    for value in ["false", "0", "f", "F", "FALSE", "False"] {
        out.push((
            "tolerate false",
            requiring(&["res"]),
            annotate(request(), "tolerate-missing", value),
        ));
    }
    // Rule order: everything at once, each rule switched off in turn.
    let mut everything = simple(
        profile(request(), Some(Unconfined as i32)),
        Field::OciHooks,
        "10-hook",
    );
    everything = simple(everything, Field::SeccompPolicy, "20-sec");
    everything = compound(everything, Field::Namespace, "network", "30-ns");
    everything = sysctl(everything, "net.x", Some("40-sys"));
    let mut all = everything_rejected();
    all.required_plugins = vec!["missing".into()];
    out.push(("order: all", all.clone(), everything.clone()));
    let mut c = all.clone();
    c.reject_oci_hook_adjustment = false;
    out.push(("order: no hooks", c.clone(), everything.clone()));
    c.reject_unconfined_seccomp_adjustment = false;
    out.push(("order: no seccomp", c.clone(), everything.clone()));
    c.reject_namespace_adjustment = false;
    out.push(("order: no namespaces", c.clone(), everything.clone()));
    c.required_plugins.clear();
    out.push(("order: nothing required", c, everything));
    out
}

/// The policy text with the configuration's words (camel case, as
/// serialized), and optionally rules that allow every field to every plugin
/// under `default: deny`.
fn policy_text(cfg: &DefaultValidatorConfig, allow_all_rules: bool) -> String {
    let mut c = cfg.clone();
    // The default validator itself ignores `enable`; running the policy
    // validator enables it.
    c.enable = true;
    let mut text = serde_norway::to_string(&c).unwrap();
    if allow_all_rules {
        let names: Vec<&str> = (1..=40)
            .filter_map(|n| Field::try_from(n).ok())
            .map(|f| f.as_str_name())
            .collect();
        text.push_str("default: deny\nrules:\n  - name: everything\n    allow:\n      fields: [");
        text.push_str(&names.join(", "));
        text.push_str("]\n");
    }
    text
}

fn same_verdict(what: &str, cfg: &DefaultValidatorConfig, req: &Req) {
    let expected = DefaultValidator::new(cfg.clone())
        .validate(req)
        .map_err(|e| e.to_string());
    for rules in [false, true] {
        let text = policy_text(cfg, rules);
        let policy = Policy::from_yaml_str(&text, "policy.yaml")
            .unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        assert_eq!(
            policy.default_validator.required_plugins,
            cfg.required_plugins
        );
        let got = PolicyValidator::new(policy)
            .validate(req)
            .map_err(|e| e.to_string());
        assert_eq!(got, expected, "{what} (rules: {rules})\n{text}");
    }
}

#[test]
fn every_default_validator_scenario_same_verdict_and_text() {
    let scenarios = scenarios();
    assert!(scenarios.len() >= 55, "{}", scenarios.len());
    let mut refused = 0;
    for (what, cfg, req) in &scenarios {
        same_verdict(what, cfg, req);
        refused += usize::from(DefaultValidator::new(cfg.clone()).validate(req).is_err());
    }
    // Both verdicts are well represented.
    assert!(refused > 20 && refused < scenarios.len() - 10, "{refused}");
}

#[test]
fn snake_case_words_are_the_same_options() {
    let text = "reject_oci_hook_adjustment: true\nrequired_plugins: [a]\n\
                tolerate_missing_plugins_annotation: tol\nreject_sysctl_adjustment: true\n";
    let p = Policy::from_yaml_str(text, "p").unwrap();
    assert!(p.default_validator.reject_oci_hook_adjustment);
    assert!(p.default_validator.reject_sysctl_adjustment);
    assert_eq!(p.default_validator.required_plugins, ["a"]);
    assert_eq!(
        p.default_validator.tolerate_missing_plugins_annotation,
        "tol"
    );
}

#[test]
fn enable_false_accepts_everything_as_the_plugin_does() {
    let p = Policy::from_yaml_str("enable: false\nrejectOCIHookAdjustment: true\n", "p").unwrap();
    let req = simple(request(), Field::OciHooks, "10-a");
    assert!(PolicyValidator::new(p).validate(&req).is_ok());
}

fn arb_config() -> impl Strategy<Value = DefaultValidatorConfig> {
    (
        any::<[bool; 6]>(),
        proptest::collection::vec(
            prop::sample::select(vec!["a", "10-a", "b", "20-b", "default-validator"]),
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(|(b, req, tol)| DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: b[0],
            reject_runtime_default_seccomp_adjustment: b[1],
            reject_unconfined_seccomp_adjustment: b[2],
            reject_custom_seccomp_adjustment: b[3],
            reject_namespace_adjustment: b[4],
            reject_sysctl_adjustment: b[5],
            required_plugins: req.into_iter().map(str::to_owned).collect(),
            tolerate_missing_plugins_annotation: if tol { "tol".into() } else { String::new() },
        })
}

fn arb_request() -> impl Strategy<Value = Req> {
    let owner = prop::sample::select(vec!["10-a", "-10-a", "20-b", "10-a,20-b"]);
    (
        proptest::option::of(owner.clone()),
        proptest::option::of(owner.clone()),
        proptest::option::of(0..4i32),
        proptest::option::of(owner.clone()),
        proptest::collection::btree_map(
            prop::sample::select(vec!["k.a", "k.b", "k.c"]),
            proptest::option::of(owner),
            0..3,
        ),
        proptest::collection::vec(
            (
                prop::sample::select(vec!["10", "20"]),
                prop::sample::select(vec!["a", "b"]),
            ),
            0..3,
        ),
        proptest::option::of(prop::sample::select(vec!["true", "false", "maybe"])),
        proptest::option::of(prop::sample::select(vec!["[a]", "[b, c]", "{", "[]"])),
        any::<bool>(),
    )
        .prop_map(
            |(hooks, sec, prof, ns, sysctls, plugins, tol, reqd, adjust)| {
                let mut r = request();
                if let Some(o) = hooks {
                    r = simple(r, Field::OciHooks, o);
                }
                if let Some(o) = sec {
                    r = simple(r, Field::SeccompPolicy, o);
                }
                if let Some(p) = prof {
                    r = profile(r, Some(p));
                }
                if let Some(o) = ns {
                    r = compound(r, Field::Namespace, "network", o);
                }
                for (k, o) in sysctls {
                    r = sysctl(r, k, o);
                }
                for (i, n) in plugins {
                    r = with_plugins(r, &[(i, n)]);
                }
                if let Some(t) = tol {
                    r = annotate(r, "tol", t);
                }
                if let Some(v) = reqd {
                    r = annotate(r, REQUIRED_PLUGINS_ANNOTATION, v);
                }
                if !adjust {
                    r = no_adjust(r);
                }
                r
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_scenarios_same_verdict_and_text(cfg in arb_config(), req in arb_request()) {
        same_verdict("random", &cfg, &req);
    }
}
