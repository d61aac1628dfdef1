use nri_api::{
    CompoundFieldOwners, Container, ContainerAdjustment, Field, FieldOwners, LinuxContainer,
    LinuxContainerAdjustment, OwningPlugins, PluginInstance, PodSandbox, SecurityProfile,
};

use super::*;

const CTR: &str = "ctr0";
const NAME: &str = "ctr-name";

/// A request for container `CTR` (named `NAME`) with an empty adjustment.
fn request() -> ValidateContainerAdjustmentRequest {
    ValidateContainerAdjustmentRequest {
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

fn fields(req: &mut ValidateContainerAdjustmentRequest) -> &mut FieldOwners {
    req.owners
        .get_or_insert_with(Default::default)
        .owners
        .entry(CTR.into())
        .or_default()
}

fn set_simple(req: &mut ValidateContainerAdjustmentRequest, field: Field, owner: &str) {
    fields(req).simple.insert(field as i32, owner.into());
}

fn set_compound(
    req: &mut ValidateContainerAdjustmentRequest,
    field: Field,
    key: &str,
    owner: &str,
) {
    fields(req)
        .compound
        .entry(field as i32)
        .or_default()
        .owners
        .insert(key.into(), owner.into());
}

fn set_profile(req: &mut ValidateContainerAdjustmentRequest, profile: Option<ProfileType>) {
    let ctr = req.container.as_mut().unwrap();
    ctr.linux = Some(LinuxContainer {
        seccomp_profile: profile.map(|p| SecurityProfile {
            profile_type: p as i32,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    });
}

fn add_sysctl(req: &mut ValidateContainerAdjustmentRequest, key: &str, owner: Option<&str>) {
    let adjust = req.adjust.get_or_insert_with(Default::default);
    adjust
        .linux
        .get_or_insert_with(LinuxContainerAdjustment::default)
        .sysctl
        .insert(key.into(), "1".into());
    if let Some(owner) = owner {
        set_compound(req, Field::Sysctl, key, owner);
    }
}

fn annotate(req: &mut ValidateContainerAdjustmentRequest, key: &str, value: &str) {
    req.pod
        .as_mut()
        .unwrap()
        .annotations
        .insert(key.into(), value.into());
}

fn validator(cfg: DefaultValidatorConfig) -> DefaultValidator {
    DefaultValidator::new(cfg)
}

fn everything_rejected() -> DefaultValidatorConfig {
    DefaultValidatorConfig::rejecting_everything()
}

fn message(v: &DefaultValidator, req: &ValidateContainerAdjustmentRequest) -> String {
    v.validate(req).unwrap_err().to_string()
}

// ---- defaults ----

#[test]
fn default_config_accepts_everything_it_can_see() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "10-a");
    set_simple(&mut req, Field::SeccompPolicy, "10-a");
    set_compound(&mut req, Field::Namespace, "network", "10-a");
    add_sysctl(&mut req, "net.core.somaxconn", Some("10-a"));
    assert_eq!(
        validator(DefaultValidatorConfig::default()).validate(&req),
        Ok(())
    );
}

#[test]
fn nothing_owned_nothing_rejected() {
    let mut req = request();
    add_sysctl(&mut req, "net.core.somaxconn", None);
    set_profile(&mut req, Some(ProfileType::RuntimeDefault));
    assert_eq!(validator(everything_rejected()).validate(&req), Ok(()));
}

// ---- rule 1: OCI hooks ----

#[test]
fn hooks_single_owner_is_plugin_quoted() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "10-hooks");
    let v = validator(DefaultValidatorConfig {
        reject_oci_hook_adjustment: true,
        ..Default::default()
    });
    let err = v.validate(&req).unwrap_err();
    assert!(err.is_rejection());
    assert_eq!(
        err.to_string(),
        r#"validation error: plugin "10-hooks" attempted restricted OCI hook injection"#
    );
}

#[test]
fn hooks_several_owners_are_plugins_quoted_as_one() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "10-a,20-b,30-c");
    let v = validator(DefaultValidatorConfig {
        reject_oci_hook_adjustment: true,
        ..Default::default()
    });
    assert_eq!(
        message(&v, &req),
        r#"validation error: plugins "10-a,20-b,30-c" attempted restricted OCI hook injection"#
    );
}

#[test]
fn hooks_allowed_when_rule_off_or_no_adjust_or_other_container() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "10-a");
    assert_eq!(
        validator(DefaultValidatorConfig::default()).validate(&req),
        Ok(())
    );

    let v = validator(DefaultValidatorConfig {
        reject_oci_hook_adjustment: true,
        ..Default::default()
    });
    let mut no_adjust = req.clone();
    no_adjust.adjust = None;
    assert_eq!(v.validate(&no_adjust), Ok(()));

    let mut other = request();
    other.owners.as_mut().unwrap().owners.insert(
        "other-ctr".into(),
        req.owners.unwrap().owners.remove(CTR).unwrap(),
    );
    assert_eq!(v.validate(&other), Ok(()));
}

#[test]
fn hooks_cleared_entry_still_counts_as_claimed() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "-10-a");
    let v = validator(everything_rejected());
    assert_eq!(
        message(&v, &req),
        r#"validation error: plugin "-10-a" attempted restricted OCI hook injection"#
    );
}

// ---- rule 2: seccomp ----

fn seccomp_case(
    profile: Option<ProfileType>,
    cfg: DefaultValidatorConfig,
) -> Result<(), ValidationError> {
    let mut req = request();
    set_profile(&mut req, profile);
    set_simple(&mut req, Field::SeccompPolicy, "10-sec");
    validator(cfg).validate(&req)
}

#[test]
fn seccomp_unconfined_message_has_double_space_and_bare_owner() {
    let cfg = DefaultValidatorConfig {
        reject_unconfined_seccomp_adjustment: true,
        ..Default::default()
    };
    let expected = "validation error: plugin 10-sec attempted restricted  unconfined seccomp policy adjustment";
    let err = seccomp_case(Some(ProfileType::Unconfined), cfg.clone()).unwrap_err();
    assert_eq!(
        err,
        ValidationError::SeccompPolicyAdjustment {
            owner: "10-sec".into(),
            profile: SeccompProfileKind::Unconfined
        }
    );
    assert_eq!(err.to_string(), expected);
    // No profile at all counts as unconfined, with or without a linux section.
    assert_eq!(
        seccomp_case(None, cfg.clone()).unwrap_err().to_string(),
        expected
    );
    let mut req = request();
    set_simple(&mut req, Field::SeccompPolicy, "10-sec");
    assert_eq!(message(&validator(cfg), &req), expected);
}

#[test]
fn seccomp_runtime_default_message_has_single_spaces() {
    let cfg = DefaultValidatorConfig {
        reject_runtime_default_seccomp_adjustment: true,
        ..Default::default()
    };
    assert_eq!(
        seccomp_case(Some(ProfileType::RuntimeDefault), cfg).unwrap_err().to_string(),
        "validation error: plugin 10-sec attempted restricted runtime default seccomp policy adjustment"
    );
}

#[test]
fn seccomp_custom_message_has_double_space() {
    let cfg = DefaultValidatorConfig {
        reject_custom_seccomp_adjustment: true,
        ..Default::default()
    };
    assert_eq!(
        seccomp_case(Some(ProfileType::Localhost), cfg)
            .unwrap_err()
            .to_string(),
        "validation error: plugin 10-sec attempted restricted  custom seccomp policy adjustment"
    );
}

#[test]
fn seccomp_each_option_covers_only_its_profile_kind() {
    let only_unconfined = DefaultValidatorConfig {
        reject_unconfined_seccomp_adjustment: true,
        ..Default::default()
    };
    let only_default = DefaultValidatorConfig {
        reject_runtime_default_seccomp_adjustment: true,
        ..Default::default()
    };
    let only_custom = DefaultValidatorConfig {
        reject_custom_seccomp_adjustment: true,
        ..Default::default()
    };
    assert!(seccomp_case(Some(ProfileType::RuntimeDefault), only_unconfined.clone()).is_ok());
    assert!(seccomp_case(Some(ProfileType::Localhost), only_unconfined).is_ok());
    assert!(seccomp_case(Some(ProfileType::Unconfined), only_default.clone()).is_ok());
    assert!(seccomp_case(None, only_default.clone()).is_ok());
    assert!(seccomp_case(Some(ProfileType::Localhost), only_default).is_ok());
    assert!(seccomp_case(Some(ProfileType::RuntimeDefault), only_custom.clone()).is_ok());
    assert!(seccomp_case(None, only_custom).is_ok());
}

#[test]
fn seccomp_unknown_profile_type_matches_no_rule() {
    let mut req = request();
    set_simple(&mut req, Field::SeccompPolicy, "10-sec");
    req.container.as_mut().unwrap().linux = Some(LinuxContainer {
        seccomp_profile: Some(SecurityProfile {
            profile_type: 7,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    });
    assert_eq!(validator(everything_rejected()).validate(&req), Ok(()));
}

#[test]
fn seccomp_skipped_without_adjust_or_owner() {
    let cfg = everything_rejected();
    let mut req = request();
    set_simple(&mut req, Field::SeccompPolicy, "10-sec");
    req.adjust = None;
    assert_eq!(validator(cfg.clone()).validate(&req), Ok(()));
    let mut unowned = request();
    set_simple(&mut unowned, Field::MemLimit, "10-mem");
    assert_eq!(validator(cfg).validate(&unowned), Ok(()));
}

// ---- rule 3: namespaces ----

#[test]
fn namespace_single_owner() {
    let mut req = request();
    set_compound(&mut req, Field::Namespace, "network", "10-net");
    let v = validator(DefaultValidatorConfig {
        reject_namespace_adjustment: true,
        ..Default::default()
    });
    assert_eq!(
        message(&v, &req),
        r#"validation error: attempted restricted namespace adjustment by plugin(s) "10-net" (namespace "network")"#
    );
}

#[test]
fn namespace_several_owners_sorted_by_type() {
    let mut req = request();
    set_compound(&mut req, Field::Namespace, "pid", "20-pid");
    set_compound(&mut req, Field::Namespace, "ipc", "30-ipc");
    set_compound(&mut req, Field::Namespace, "network", "-10-net");
    let v = validator(DefaultValidatorConfig {
        reject_namespace_adjustment: true,
        ..Default::default()
    });
    assert_eq!(
        message(&v, &req),
        r#"validation error: attempted restricted namespace adjustment by plugin(s) "30-ipc" (namespace "ipc"), "-10-net" (namespace "network"), "20-pid" (namespace "pid")"#
    );
}

#[test]
fn namespace_empty_owner_map_rejects_with_trailing_space() {
    let mut req = request();
    fields(&mut req)
        .compound
        .insert(Field::Namespace as i32, CompoundFieldOwners::default());
    let v = validator(DefaultValidatorConfig {
        reject_namespace_adjustment: true,
        ..Default::default()
    });
    assert_eq!(
        message(&v, &req),
        "validation error: attempted restricted namespace adjustment by plugin(s) "
    );
}

#[test]
fn namespace_allowed_when_rule_off_or_no_adjust() {
    let mut req = request();
    set_compound(&mut req, Field::Namespace, "network", "10-net");
    assert!(validator(DefaultValidatorConfig::default())
        .validate(&req)
        .is_ok());
    req.adjust = None;
    assert!(validator(everything_rejected()).validate(&req).is_ok());
}

// ---- rule 4: required plugins ----

fn requiring(plugins: &[&str]) -> DefaultValidatorConfig {
    DefaultValidatorConfig {
        required_plugins: plugins.iter().map(|s| s.to_string()).collect(),
        tolerate_missing_plugins_annotation: "tolerate-missing".into(),
        ..Default::default()
    }
}

#[test]
fn required_single_missing() {
    let v = validator(requiring(&["res"]));
    let err = v.validate(&request()).unwrap_err();
    assert_eq!(
        err,
        ValidationError::MissingRequiredPlugins {
            missing: vec!["res".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        r#"validation error: required plugin "res" not present"#
    );
}

#[test]
fn required_several_missing_joined_and_quoted_once() {
    let v = validator(requiring(&["a", "default-validator", "10-b", "c"]));
    assert_eq!(
        message(&v, &request()),
        r#"validation error: required plugins "a,10-b,c" not present"#
    );
}

#[test]
fn required_present_by_name_or_qualified_name() {
    let mut req = request();
    req.plugins.push(instance("10", "res"));
    assert!(
        validator(requiring(&["res", "10-res", "00-default-validator"]))
            .validate(&req)
            .is_ok()
    );
    let err = validator(requiring(&["20-res"]))
        .validate(&req)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"validation error: required plugin "20-res" not present"#
    );
}

#[test]
fn required_checked_without_adjustment_or_container() {
    let mut req = request();
    req.adjust = None;
    req.owners = None;
    assert!(validator(requiring(&["res"])).validate(&req).is_err());
    req.container = None;
    req.pod = None;
    assert!(validator(requiring(&["res"])).validate(&req).is_err());
    assert!(validator(requiring(&[])).validate(&req).is_ok());
}

#[test]
fn required_from_annotation_after_configured_ones() {
    let mut req = request();
    annotate(&mut req, REQUIRED_PLUGINS_ANNOTATION, r#"["x", "y"]"#);
    assert_eq!(
        message(&validator(requiring(&["a"])), &req),
        r#"validation error: required plugins "a,x,y" not present"#
    );
    req.plugins.push(instance("10", "x"));
    req.plugins.push(instance("20", "y"));
    assert_eq!(
        message(&validator(requiring(&["a"])), &req),
        r#"validation error: required plugin "a" not present"#
    );
    assert!(validator(requiring(&[])).validate(&req).is_ok());
}

#[test]
fn required_annotation_yaml_flow_list() {
    let mut req = request();
    annotate(
        &mut req,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/container.{NAME}"),
        "[ plugin ]",
    );
    assert_eq!(
        message(&validator(DefaultValidatorConfig::default()), &req),
        r#"validation error: required plugin "plugin" not present"#
    );
}

#[test]
fn required_annotation_container_scope_wins() {
    let mut req = request();
    annotate(&mut req, REQUIRED_PLUGINS_ANNOTATION, "[plain]");
    annotate(
        &mut req,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/pod"),
        "[pod]",
    );
    let v = validator(DefaultValidatorConfig::default());
    assert_eq!(
        message(&v, &req),
        r#"validation error: required plugin "pod" not present"#
    );
    annotate(
        &mut req,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/container.{NAME}"),
        "[ctr]",
    );
    assert_eq!(
        message(&v, &req),
        r#"validation error: required plugin "ctr" not present"#
    );
    annotate(
        &mut req,
        &format!("{REQUIRED_PLUGINS_ANNOTATION}/container.other"),
        "[other]",
    );
    assert_eq!(
        message(&v, &req),
        r#"validation error: required plugin "ctr" not present"#
    );
}

#[test]
fn required_annotation_invalid() {
    let mut req = request();
    annotate(&mut req, REQUIRED_PLUGINS_ANNOTATION, "{not: a list}");
    let err = validator(DefaultValidatorConfig::default())
        .validate(&req)
        .unwrap_err();
    assert!(!err.is_rejection());
    let text = err.to_string();
    let prefix = r#"invalid required-plugins.noderesource.dev annotation "{not: a list}": "#;
    assert!(
        text.starts_with(prefix) && text.len() > prefix.len(),
        "{text}"
    );
}

#[test]
fn tolerate_true_spellings_skip_the_rule() {
    for value in ["true", "1", "t", "T", "TRUE", "True"] {
        let mut req = request();
        annotate(&mut req, "tolerate-missing", value);
        // Even an unreadable required-plugins annotation is not looked at.
        annotate(&mut req, REQUIRED_PLUGINS_ANNOTATION, "{");
        assert!(
            validator(requiring(&["res"])).validate(&req).is_ok(),
            "{value}"
        );
    }
}

#[test]
fn tolerate_false_keeps_the_rule() {
    for value in ["false", "0", "f", "F", "FALSE", "False"] {
        let mut req = request();
        annotate(&mut req, "tolerate-missing", value);
        assert_eq!(
            message(&validator(requiring(&["res"])), &req),
            r#"validation error: required plugin "res" not present"#,
            "{value}"
        );
    }
}

#[test]
fn tolerate_invalid_value_is_an_error_even_with_nothing_required() {
    let mut req = request();
    annotate(&mut req, "tolerate-missing", "yes");
    let err = validator(requiring(&[])).validate(&req).unwrap_err();
    assert!(!err.is_rejection());
    assert_eq!(
        err.to_string(),
        r#"invalid tolerate-missing annotation "yes": strconv.ParseBool: parsing "yes": invalid syntax"#
    );
}

#[test]
fn tolerate_scoped_to_container_wins() {
    let mut req = request();
    annotate(&mut req, "tolerate-missing", "true");
    annotate(
        &mut req,
        &format!("tolerate-missing/container.{NAME}"),
        "false",
    );
    assert!(validator(requiring(&["res"])).validate(&req).is_err());
    annotate(
        &mut req,
        &format!("tolerate-missing/container.{NAME}"),
        "true",
    );
    annotate(&mut req, "tolerate-missing/pod", "false");
    assert!(validator(requiring(&["res"])).validate(&req).is_ok());
}

#[test]
fn tolerate_annotation_ignored_when_not_configured() {
    let mut req = request();
    annotate(&mut req, "tolerate-missing", "true");
    let cfg = DefaultValidatorConfig {
        required_plugins: vec!["res".into()],
        ..Default::default()
    };
    assert!(validator(cfg).validate(&req).is_err());
}

// ---- rule 5: sysctl ----

#[test]
fn sysctl_single_owner_unquoted() {
    let mut req = request();
    add_sysctl(&mut req, "net.ipv4.ip_forward", Some("10-net"));
    let v = validator(DefaultValidatorConfig {
        reject_sysctl_adjustment: true,
        ..Default::default()
    });
    assert_eq!(
        message(&v, &req),
        "validation error: attempted restricted sysctl adjustment by plugin(s) 10-net"
    );
}

#[test]
fn sysctl_several_owners_in_key_order_only_owned_keys() {
    let mut req = request();
    add_sysctl(&mut req, "vm.swappiness", Some("30-c"));
    add_sysctl(&mut req, "kernel.shmmax", Some("10-a"));
    add_sysctl(&mut req, "net.core.somaxconn", None);
    add_sysctl(&mut req, "net.ipv4.ip_forward", Some("10-a"));
    // Owned, but not part of the adjustment: not reported.
    set_compound(&mut req, Field::Sysctl, "fs.file-max", "40-d");
    let v = validator(DefaultValidatorConfig {
        reject_sysctl_adjustment: true,
        ..Default::default()
    });
    let err = v.validate(&req).unwrap_err();
    assert_eq!(
        err.to_string(),
        "validation error: attempted restricted sysctl adjustment by plugin(s) 10-a, 10-a, 30-c"
    );
}

#[test]
fn sysctl_skipped_without_linux_adjustment_or_rule() {
    let mut req = request();
    set_compound(&mut req, Field::Sysctl, "fs.file-max", "40-d");
    assert!(validator(everything_rejected()).validate(&req).is_ok());
    add_sysctl(&mut req, "fs.file-max", Some("40-d"));
    let mut cfg = everything_rejected();
    cfg.reject_sysctl_adjustment = false;
    assert!(validator(cfg).validate(&req).is_ok());
}

// ---- order of the rules ----

#[test]
fn rules_are_checked_in_reference_order() {
    let mut req = request();
    set_simple(&mut req, Field::OciHooks, "1-hooks");
    set_simple(&mut req, Field::SeccompPolicy, "2-sec");
    set_compound(&mut req, Field::Namespace, "pid", "3-ns");
    add_sysctl(&mut req, "kernel.x", Some("5-sys"));
    let mut cfg = everything_rejected();
    cfg.required_plugins = vec!["4-req".into()];
    let mut v = validator(cfg);

    let mut expect = |text: &str, turn_off: fn(&mut DefaultValidatorConfig)| {
        assert_eq!(message(&v, &req), text);
        let mut cfg = v.config().clone();
        turn_off(&mut cfg);
        v.set_config(cfg);
    };
    expect(
        r#"validation error: plugin "1-hooks" attempted restricted OCI hook injection"#,
        |c| c.reject_oci_hook_adjustment = false,
    );
    expect(
        "validation error: plugin 2-sec attempted restricted  unconfined seccomp policy adjustment",
        |c| c.reject_unconfined_seccomp_adjustment = false,
    );
    expect(
        r#"validation error: attempted restricted namespace adjustment by plugin(s) "3-ns" (namespace "pid")"#,
        |c| c.reject_namespace_adjustment = false,
    );
    expect(
        r#"validation error: required plugin "4-req" not present"#,
        |c| c.required_plugins.clear(),
    );
    expect(
        "validation error: attempted restricted sysctl adjustment by plugin(s) 5-sys",
        |c| c.reject_sysctl_adjustment = false,
    );
    assert_eq!(v.validate(&req), Ok(()));
}

#[test]
fn set_config_replaces_the_configuration() {
    let mut v = DefaultValidator::default();
    assert_eq!(v.config(), &DefaultValidatorConfig::default());
    v.set_config(requiring(&["x"]));
    assert_eq!(v.config().required_plugins, ["x"]);
    assert!(v.validate(&request()).is_err());
}

#[test]
fn missing_owners_treated_as_unowned() {
    let mut req = request();
    req.owners = None;
    add_sysctl(&mut req, "kernel.x", None);
    assert_eq!(validator(everything_rejected()).validate(&req), Ok(()));
}
