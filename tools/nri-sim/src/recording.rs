//! Reading `nri-tap` recordings (one JSON document per line, see
//! `tools/nri-tap/README.md`): every ttRPC request with its response,
//! grouped by plugin connection (session), for [`crate::replay`] and
//! [`crate::convert`].

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// Why a recording cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The recording.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a recording line.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The recording.
        path: String,
        /// One-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Choosing the plugin or session failed, or what was chosen cannot be
    /// used.
    #[error("{path}: {message}")]
    Select {
        /// The recording.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// The answer to a recorded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Line of the response.
    pub line: usize,
    /// ttRPC status code (0: OK).
    pub code: i64,
    /// Status message (empty when none).
    pub message: String,
    /// The decoded response payload (successful answers).
    pub response: Option<Value>,
}

impl Answer {
    /// The form compared by `replay`: `{"status": {"code", "message"},
    /// "response"}` (`message` only when not empty, `response` only when
    /// there is one).
    pub fn to_json(&self) -> Value {
        let mut status = serde_json::Map::new();
        status.insert("code".into(), self.code.into());
        if !self.message.is_empty() {
            status.insert("message".into(), self.message.clone().into());
        }
        let mut doc = serde_json::Map::new();
        doc.insert("status".into(), status.into());
        if let Some(r) = &self.response {
            doc.insert("response".into(), r.clone());
        }
        doc.into()
    }
}

/// One recorded request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Line of the request.
    pub line: usize,
    /// Whether the runtime sent it (`runtime->plugin`); otherwise the
    /// plugin did (RegisterPlugin, UpdateContainers).
    pub to_plugin: bool,
    /// ttRPC method.
    pub method: String,
    /// The request's timeout, when it had one.
    pub timeout_ns: Option<u64>,
    /// The decoded request payload.
    pub request: Value,
    /// Its answer, when recorded.
    pub answer: Option<Answer>,
}

/// The messages of one plugin connection.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The tap's session number.
    pub id: u64,
    /// The plugin's full name (`10-logger`), once it registered.
    pub plugin: Option<String>,
    /// Requests in the order they passed the tap.
    pub exchanges: Vec<Exchange>,
    /// Why some messages of this session cannot be replayed (oversized,
    /// malformed, undecoded payloads), with their lines.
    pub problems: Vec<String>,
}

/// A whole recording.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Its path, for messages.
    pub path: String,
    /// Sessions in order of their first line.
    pub sessions: Vec<Session>,
}

fn field_u64(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl Recording {
    /// Reads the recording at `path`.
    pub fn load(path: &Path) -> Result<Recording, RecordingError> {
        let text = std::fs::read(path).map_err(|source| RecordingError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Recording::parse(&String::from_utf8_lossy(&text), &path.display().to_string())
    }

    /// Parses recording text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Recording, RecordingError> {
        let err = |line: usize, message: String| RecordingError::Line {
            path: path.to_string(),
            line,
            message,
        };
        let mut sessions: Vec<Session> = Vec::new();
        let mut index: HashMap<u64, usize> = HashMap::new();
        // (session, conn, stream) -> (session index, exchange index)
        let mut pending: HashMap<(u64, u64, u64), (usize, usize)> = HashMap::new();
        let total = text.lines().count();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(raw).map_err(|e| {
                let hint = if n == total && !text.ends_with('\n') {
                    " (the recording looks truncated)"
                } else {
                    ""
                };
                err(n, format!("not a recording line{hint}: {e}"))
            })?;
            let (Some(kind), Some(session)) = (
                v.get("type").and_then(Value::as_str),
                field_u64(&v, "session"),
            ) else {
                return Err(err(
                    n,
                    "not a recording line: no `type` or `session` (is this an nri-tap recording?)"
                        .into(),
                ));
            };
            let si = *index.entry(session).or_insert_with(|| {
                sessions.push(Session {
                    id: session,
                    ..Default::default()
                });
                sessions.len() - 1
            });
            let s = &mut sessions[si];
            if s.plugin.is_none() {
                s.plugin = v.get("plugin").and_then(Value::as_str).map(String::from);
            }
            let conn = field_u64(&v, "conn").unwrap_or(0);
            let stream = field_u64(&v, "stream").unwrap_or(0);
            match kind {
                "request" => {
                    let method = v.get("method").and_then(Value::as_str);
                    let (Some(method), Some(request)) = (method, v.get("request")) else {
                        let why = v
                            .get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("no decoded request");
                        s.problems.push(format!("line {n}: {why}"));
                        continue;
                    };
                    pending.insert((session, conn, stream), (si, s.exchanges.len()));
                    s.exchanges.push(Exchange {
                        line: n,
                        to_plugin: v.get("dir").and_then(Value::as_str) == Some("runtime->plugin"),
                        method: method.to_string(),
                        timeout_ns: field_u64(&v, "timeout_ns"),
                        request: request.clone(),
                        answer: None,
                    });
                }
                "response" => {
                    let Some((si, ei)) = pending.remove(&(session, conn, stream)) else {
                        continue;
                    };
                    let status = v.get("status");
                    let code = status
                        .and_then(|s| s.get("code"))
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    let response = v.get("response").cloned();
                    if code == 0 && response.is_none() {
                        let why = v
                            .get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("no decoded response");
                        sessions[si].problems.push(format!("line {n}: {why}"));
                    }
                    sessions[si].exchanges[ei].answer = Some(Answer {
                        line: n,
                        code,
                        message: status
                            .and_then(|s| s.get("message"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        response,
                    });
                }
                "oversized" => s
                    .problems
                    .push(format!("line {n}: a message over 4 MiB was not recorded")),
                "malformed" => s.problems.push(format!(
                    "line {n}: undecodable bytes: {}",
                    v.get("error").and_then(Value::as_str).unwrap_or("?")
                )),
                _ => {}
            }
        }
        Ok(Recording {
            path: path.to_string(),
            sessions,
        })
    }

    /// The plugins of the recording (full names), in order of appearance.
    pub fn plugins(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.sessions {
            if let Some(p) = &s.plugin {
                if !out.contains(p) && s.exchanges.iter().any(|e| e.to_plugin) {
                    out.push(p.clone());
                }
            }
        }
        out
    }

    /// The session to use: of `plugin` (full `10-logger` or base `logger`
    /// name; may be left out when the recording has one plugin), and of
    /// those the one numbered `session` (may be left out when the plugin
    /// connected once). Errors list the choices.
    pub fn select(
        &self,
        plugin: Option<&str>,
        session: Option<u64>,
    ) -> Result<&Session, RecordingError> {
        let fail = |message: String| RecordingError::Select {
            path: self.path.clone(),
            message,
        };
        let plugins = self.plugins();
        if plugins.is_empty() {
            return Err(fail(
                "no plugin received requests in this recording (empty, or filtered out?)".into(),
            ));
        }
        let matches = |p: &str, want: &str| {
            p == want || p.split_once('-').is_some_and(|(_, base)| base == want)
        };
        let chosen: Vec<&String> = match plugin {
            Some(w) => plugins.iter().filter(|p| matches(p, w)).collect(),
            None => plugins.iter().collect(),
        };
        let name = match (&chosen[..], plugin) {
            ([one], _) => (*one).clone(),
            ([], Some(w)) => {
                return Err(fail(format!(
                    "no plugin {w:?} (recorded: {})",
                    plugins.join(", ")
                )))
            }
            (_, _) => {
                return Err(fail(format!(
                    "several plugins, choose one with --plugin: {}",
                    chosen
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        let of_plugin: Vec<&Session> = self
            .sessions
            .iter()
            .filter(|s| {
                s.plugin.as_deref() == Some(&name) && s.exchanges.iter().any(|e| e.to_plugin)
            })
            .collect();
        let s = match (session, &of_plugin[..]) {
            (Some(id), _) => of_plugin
                .iter()
                .find(|s| s.id == id)
                .copied()
                .ok_or_else(|| {
                    fail(format!(
                        "{name} has no session {id} (sessions: {})",
                        ids(&of_plugin)
                    ))
                })?,
            (None, [one]) => *one,
            (None, _) => {
                return Err(fail(format!(
                    "{name} connected several times, choose one with --session: {}",
                    ids(&of_plugin)
                )))
            }
        };
        if !s.problems.is_empty() {
            return Err(fail(format!(
                "session {} of {name} cannot be replayed: {}",
                s.id,
                s.problems.join("; ")
            )));
        }
        Ok(s)
    }
}

fn ids(s: &[&Session]) -> String {
    s.iter()
        .map(|s| s.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC: &str = r#"{"ts_ms":1,"session":1,"plugin":null,"type":"connect"}
{"ts_ms":2,"session":1,"plugin":"10-a","type":"request","dir":"plugin->runtime","conn":2,"stream":1,"method":"RegisterPlugin","request":{"plugin_name":"a","plugin_idx":"10"}}
{"ts_ms":3,"session":1,"plugin":"10-a","type":"response","dir":"runtime->plugin","conn":2,"stream":1,"method":"RegisterPlugin","status":{"code":0},"response":{}}
{"ts_ms":4,"session":1,"plugin":"10-a","type":"request","dir":"runtime->plugin","conn":1,"stream":1,"method":"Configure","request":{"config":"x"}}
{"ts_ms":5,"session":1,"plugin":"10-a","type":"response","dir":"plugin->runtime","conn":1,"stream":1,"method":"Configure","status":{"code":0},"response":{"events":1}}
{"ts_ms":6,"session":2,"plugin":"20-b","type":"request","dir":"runtime->plugin","conn":1,"stream":1,"method":"Configure","request":{}}
"#;

    #[test]
    fn requests_pair_with_answers_and_plugins_are_chosen() {
        let r = Recording::parse(REC, "r.jsonl").unwrap();
        assert_eq!(r.plugins(), ["10-a", "20-b"]);
        let err = r.select(None, None).unwrap_err().to_string();
        assert!(err.contains("--plugin: 10-a, 20-b"), "{err}");
        let s = r.select(Some("a"), None).unwrap();
        assert_eq!(s.exchanges.len(), 2);
        assert_eq!(s.exchanges[1].method, "Configure");
        assert_eq!(s.exchanges[1].answer.as_ref().unwrap().line, 5);
        assert!(r.select(Some("20-b"), None).unwrap().exchanges[0]
            .answer
            .is_none());
        let err = r.select(Some("c"), None).unwrap_err().to_string();
        assert!(err.contains("no plugin \"c\""), "{err}");
    }

    #[test]
    fn a_plugin_that_connected_twice_needs_a_session() {
        let again = REC.replace("\"session\":1", "\"session\":3");
        let r = Recording::parse(&format!("{REC}{again}"), "r.jsonl").unwrap();
        let err = r.select(Some("10-a"), None).unwrap_err().to_string();
        assert!(err.contains("--session: 1, 3"), "{err}");
        assert_eq!(r.select(Some("10-a"), Some(3)).unwrap().id, 3);
        let err = r.select(Some("10-a"), Some(2)).unwrap_err().to_string();
        assert!(err.contains("no session 2 (sessions: 1, 3)"), "{err}");
        let bad = format!(
            "{REC}{}",
            r#"{"session":1,"plugin":"10-a","type":"oversized","dir":"runtime->plugin","conn":1,"stream":9,"bytes":5000000}"#
        );
        let r = Recording::parse(&bad, "r.jsonl").unwrap();
        let err = r.select(Some("a"), None).unwrap_err().to_string();
        assert!(
            err.contains("cannot be replayed: line 7: a message over 4 MiB"),
            "{err}"
        );
    }

    #[test]
    fn truncated_and_foreign_lines_are_errors() {
        let cut = &REC[..REC.len() - 20];
        let err = Recording::parse(cut, "r.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("r.jsonl:6: "), "{err}");
        assert!(err.contains("truncated"), "{err}");
        let err = Recording::parse("{\"a\": 1}\n", "r.jsonl")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nri-tap recording"), "{err}");
        let err = Recording::parse("\u{0}\u{1}garbage\n", "r.jsonl")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("r.jsonl:1: not a recording line"), "{err}");
        let empty = Recording::parse("", "r.jsonl").unwrap();
        assert!(empty.select(None, None).is_err());
    }
}
