//! The network device annotation of a pod.
//!
//! ```yaml
//! netdevice.noderesource.dev: |
//!   - name: enp2s2f0      # device on the host (required)
//!     new_name: eth1      # name in the pod (default: the host name)
//!     address: 192.168.2.2
//!     prefix: 24          # default 32 (IPv4) or 128 (IPv6) when an address is given
//!     mtu: 1500
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_norway::Value;

/// Annotation key (singular, as the Go plugin reads it).
pub const NETDEVICE_KEY: &str = "netdevice.noderesource.dev";
/// Plural spelling of the key, as the Go plugin's documentation writes it.
pub const NETDEVICES_KEY: &str = "netdevices.noderesource.dev";
/// Older key, still accepted.
pub const OLD_NETDEVICE_KEY: &str = "netdevices.nri.containerd.io";

/// One network device to move into the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDevice {
    /// Name on the host.
    pub name: String,
    /// Name in the pod's network namespace.
    pub new_name: String,
    /// Address to configure in the pod, with its prefix length.
    pub address: Option<(IpAddr, u8)>,
    /// MTU to set; 0 keeps the device's.
    pub mtu: u32,
}

/// The annotation could not be read. The pod is then not started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetDeviceError {
    /// Not YAML, or not a list of devices.
    #[error("invalid device annotation {key:?}: {reason}")]
    Syntax {
        /// The annotation key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The address does not parse.
    #[error("error parsing address {0}")]
    Address(String),
    /// The prefix length does not fit the address.
    #[error("invalid prefix {prefix} for address {address}")]
    Prefix {
        /// The address.
        address: String,
        /// The prefix length.
        prefix: i64,
    },
}

/// The keys looked at, in order: pod-scoped first, then the bare keys.
pub fn annotation_keys() -> [String; 6] {
    [
        format!("{NETDEVICE_KEY}/pod"),
        format!("{NETDEVICES_KEY}/pod"),
        format!("{OLD_NETDEVICE_KEY}/pod"),
        NETDEVICE_KEY.to_string(),
        NETDEVICES_KEY.to_string(),
        OLD_NETDEVICE_KEY.to_string(),
    ]
}

/// The network devices annotated on a pod (the first key present wins).
pub fn parse_netdevices(
    annotations: &BTreeMap<String, String>,
) -> Result<Vec<NetDevice>, NetDeviceError> {
    let Some((key, value)) = annotation_keys()
        .into_iter()
        .find_map(|k| annotations.get(&k).map(|v| (k, v)))
    else {
        return Ok(Vec::new());
    };
    let syntax = |reason: String| NetDeviceError::Syntax {
        key: key.clone(),
        reason,
    };
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let doc: Value = serde_norway::from_str(value).map_err(|e| syntax(e.to_string()))?;
    let items = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        _ => return Err(syntax("expected a list of devices".into())),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let raw = parse_item(item).map_err(|r| syntax(format!("entry {i}: {r}")))?;
            raw.validate().map_err(|e| match e {
                Invalid::Other(r) => syntax(format!("entry {i}: {r}")),
                Invalid::Device(e) => e,
            })
        })
        .collect()
}

#[derive(Default)]
struct RawDevice {
    name: String,
    new_name: String,
    address: String,
    prefix: i64,
    mtu: i64,
}

enum Invalid {
    Other(String),
    Device(NetDeviceError),
}

/// Keys matched case-insensitively (as Go's JSON decoding does); unknown keys ignored.
fn parse_item(item: &Value) -> Result<RawDevice, String> {
    let Value::Mapping(map) = item else {
        return Err("expected a mapping".into());
    };
    let mut dev = RawDevice::default();
    for (k, v) in map {
        let Some(k) = k.as_str() else { continue };
        match k.to_ascii_lowercase().as_str() {
            "name" => dev.name = string(k, v)?,
            "new_name" => dev.new_name = string(k, v)?,
            "address" => dev.address = string(k, v)?,
            "prefix" => dev.prefix = int(k, v)?,
            "mtu" => dev.mtu = int(k, v)?,
            _ => {}
        }
    }
    Ok(dev)
}

fn string(key: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        _ => Err(format!("{key} must be a string")),
    }
}

fn int(key: &str, v: &Value) -> Result<i64, String> {
    match v {
        Value::Null => Ok(0),
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("{key} must be an integer")),
        _ => Err(format!("{key} must be an integer")),
    }
}

impl RawDevice {
    fn validate(self) -> Result<NetDevice, Invalid> {
        if self.name.is_empty() {
            return Err(Invalid::Other("name is required".into()));
        }
        let mtu = u32::try_from(self.mtu)
            .map_err(|_| Invalid::Other(format!("invalid mtu {}", self.mtu)))?;
        let address = if self.address.is_empty() {
            None
        } else {
            let ip: IpAddr = self
                .address
                .parse()
                .map_err(|_| Invalid::Device(NetDeviceError::Address(self.address.clone())))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match self.prefix {
                0 => max,
                p if (1..=i64::from(max)).contains(&p) => p as u8,
                p => {
                    return Err(Invalid::Device(NetDeviceError::Prefix {
                        address: self.address,
                        prefix: p,
                    }))
                }
            };
            Some((ip, prefix))
        };
        let new_name = if self.new_name.is_empty() {
            self.name.clone()
        } else {
            self.new_name
        };
        Ok(NetDevice {
            name: self.name,
            new_name,
            address,
            mtu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_interop::plugin_tests::annotations as ann;

    fn dev(name: &str, new_name: &str, address: Option<(&str, u8)>, mtu: u32) -> NetDevice {
        NetDevice {
            name: name.into(),
            new_name: new_name.into(),
            address: address.map(|(a, p)| (a.parse().unwrap(), p)),
            mtu,
        }
    }

    #[test]
    fn parses_devices_with_defaults() {
        let value = "
- name: enp2s2f0
  new_name: eth1
  address: 192.168.2.2
  prefix: 24
  mtu: 1500
- name: enp2s2f1
  address: 10.0.0.1
- NAME: eno1
  Address: fd00::1
";
        assert_eq!(
            parse_netdevices(&ann(&[(NETDEVICE_KEY, value)])).unwrap(),
            vec![
                dev("enp2s2f0", "eth1", Some(("192.168.2.2", 24)), 1500),
                dev("enp2s2f1", "enp2s2f1", Some(("10.0.0.1", 32)), 0),
                dev("eno1", "eno1", Some(("fd00::1", 128)), 0),
            ]
        );
    }

    #[test]
    fn key_precedence_and_legacy_keys() {
        let a = "- name: a";
        let b = "- name: b";
        let keys = annotation_keys();
        for (i, first) in keys.iter().enumerate() {
            for later in &keys[i + 1..] {
                let got = parse_netdevices(&ann(&[(first, a), (later, b)])).unwrap();
                assert_eq!(got[0].name, "a", "{first} should win over {later}");
            }
        }
        let got = parse_netdevices(&ann(&[("netdevices.nri.containerd.io", b)])).unwrap();
        assert_eq!(got[0].name, "b");
        assert_eq!(parse_netdevices(&ann(&[("other", a)])).unwrap(), vec![]);
        assert_eq!(
            parse_netdevices(&ann(&[(NETDEVICE_KEY, "")])).unwrap(),
            vec![]
        );
    }

    #[test]
    fn bad_annotations_are_refused() {
        let err =
            parse_netdevices(&ann(&[(NETDEVICE_KEY, "- name: a\n  address: 1.2.3")])).unwrap_err();
        assert_eq!(err.to_string(), "error parsing address 1.2.3");
        let err = parse_netdevices(&ann(&[(
            NETDEVICE_KEY,
            "- {name: a, address: 1.2.3.4, prefix: 33}",
        )]))
        .unwrap_err();
        assert_eq!(err.to_string(), "invalid prefix 33 for address 1.2.3.4");
        for value in [
            "name: a",
            "- new_name: x",
            "- {name: a, mtu: -1}",
            "- {name: [a]}",
            "- [",
            "- 3",
        ] {
            let err = parse_netdevices(&ann(&[(NETDEVICE_KEY, value)])).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid device annotation {NETDEVICE_KEY:?}: ")),
                "{value}: {err}"
            );
        }
    }
}
