//! What the minimal plugins of this package share: their command line.

/// `(name, idx, socket)` from this program's command line; see [`parse`].
pub fn parse_args() -> Result<(String, String, Option<String>), String> {
    parse(std::env::args().skip(1))
}

/// `(name, idx, socket)` from `[-config FILE] -name NAME -idx NN -socket PATH`
/// (`-config` is ignored; name and index default to `min` and `10`).
///
/// ```
/// use nri_interop_min_plugin::parse;
///
/// let args = ["-config", "x.json", "-name", "p1", "-idx", "11", "-socket", "/s"];
/// let parsed = parse(args.iter().map(|a| a.to_string()));
/// assert_eq!(parsed, Ok(("p1".into(), "11".into(), Some("/s".into()))));
/// assert!(parse(["-name".to_string()].into_iter()).is_err());
/// assert!(parse(["-x".to_string(), "1".to_string()].into_iter()).is_err());
/// ```
pub fn parse(
    mut args: impl Iterator<Item = String>,
) -> Result<(String, String, Option<String>), String> {
    let (mut name, mut idx, mut socket) = ("min".to_owned(), "10".to_owned(), None);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("flag {flag} needs a value"))?;
        match flag.trim_start_matches('-') {
            "config" => {}
            "name" => name = value,
            "idx" => idx = value,
            "socket" => socket = Some(value),
            other => return Err(format!("unknown flag -{other}")),
        }
    }
    Ok((name, idx, socket))
}
