//! A small command-line parser in the style runc's CLI accepts (Go flag
//! syntax): `--name value`, `--name=value`, `-name value`, boolean
//! `--name`, and `--` ending the flags. Flags and positionals may mix.

use std::collections::{HashMap, HashSet};

/// One flag: its canonical name and every spelling (without dashes).
#[derive(Clone, Copy)]
pub struct Flag {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub takes_value: bool,
}

impl Flag {
    /// A flag that takes a value.
    pub const fn value(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            takes_value: true,
        }
    }

    /// A boolean flag.
    pub const fn switch(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            takes_value: false,
        }
    }
}

/// What [`parse`] found.
#[derive(Debug, Default)]
pub struct Parsed {
    values: HashMap<&'static str, String>,
    /// Every value of each flag, in order (a flag given several times).
    all: HashMap<&'static str, Vec<String>>,
    switches: HashSet<&'static str>,
    pub positionals: Vec<String>,
}

impl Parsed {
    /// The value of flag `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Every value given for flag `name`, in order.
    pub fn values(&self, name: &str) -> &[String] {
        self.all.get(name).map_or(&[], Vec::as_slice)
    }

    /// Whether switch `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.switches.contains(name)
    }
}

/// Parses `args` against `flags`; an unknown flag is an error.
pub fn parse(args: &[String], flags: &[Flag]) -> Result<Parsed, String> {
    parse_with(args, flags, false)
}

/// As [`parse`], but flags end at the first positional: it and everything
/// after it are positionals (`exec <id> <cmd> -c ...`, as runc's CLI).
pub fn parse_head(args: &[String], flags: &[Flag]) -> Result<Parsed, String> {
    parse_with(args, flags, true)
}

fn parse_with(args: &[String], flags: &[Flag], stop_at_positional: bool) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            out.positionals.extend(it.by_ref().cloned());
            break;
        }
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            out.positionals.push(arg.clone());
            if stop_at_positional {
                out.positionals.extend(it.by_ref().cloned());
                break;
            }
            continue;
        };
        if body.is_empty() {
            out.positionals.push(arg.clone());
            continue;
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let flag = flags
            .iter()
            .find(|f| f.name == name || f.aliases.contains(&name))
            .ok_or_else(|| format!("unknown flag '{arg}'"))?;
        if flag.takes_value {
            let v = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("flag '{arg}' needs a value"))?,
            };
            out.all.entry(flag.name).or_default().push(v.clone());
            out.values.insert(flag.name, v);
        } else {
            match inline.as_deref() {
                None | Some("true") => {
                    out.switches.insert(flag.name);
                }
                Some("false") => {
                    out.switches.remove(flag.name);
                }
                Some(v) => return Err(format!("flag '{name}' is a switch, got '{v}'")),
            }
        }
    }
    Ok(out)
}

/// The single positional `what` (e.g. the container id), or an error.
pub fn one_positional<'a>(p: &'a Parsed, what: &str) -> Result<&'a str, String> {
    match p.positionals.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("missing {what}")),
        more => Err(format!("expected one {what}, got {}", more.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[Flag::value("bundle", &["b"]), Flag::switch("force", &["f"])];

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_go_style_flags() {
        let p = parse(&s(&["-b", "/x", "id", "--force"]), FLAGS).expect("valid");
        assert_eq!(p.value("bundle"), Some("/x"));
        assert!(p.has("force"));
        assert_eq!(p.positionals, ["id"]);
        let p = parse(&s(&["--bundle=/y", "--", "-f"]), FLAGS).expect("valid");
        assert_eq!(p.value("bundle"), Some("/y"));
        assert!(!p.has("force"));
        assert_eq!(p.positionals, ["-f"]);
    }

    #[test]
    fn rejects_unknown_and_missing_values() {
        assert!(parse(&s(&["--nope"]), FLAGS).is_err());
        assert!(parse(&s(&["--bundle"]), FLAGS).is_err());
        assert!(parse(&s(&["--force=maybe"]), FLAGS).is_err());
    }

    #[test]
    fn head_parsing_stops_at_the_first_positional() {
        let p = parse_head(
            &s(&["-b", "x", "-b", "y", "id", "sh", "-c", "--force"]),
            FLAGS,
        )
        .expect("valid");
        assert_eq!(p.values("bundle"), ["x", "y"]);
        assert!(!p.has("force"));
        assert_eq!(p.positionals, ["id", "sh", "-c", "--force"]);
    }
}
