//! `${VAR}` expansion of configuration values.
//!
//! Tokens belong in the environment, not in the file. Expansion is strict so that a missing
//! variable fails the load (and a reload keeps the running configuration) instead of sending
//! an empty or literal `${TOKEN}` to a server; its errors name the variable, never a value.

/// Expands `${VAR}` references; `$${` is a literal `${`, any other `$` is kept as is.
/// The error text names the variable but never contains a value.
pub(super) fn expand_env(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                return Err("unterminated ${ (missing '}'); write $${ for a literal ${".to_owned());
            };
            let name = &after[..end];
            if !is_variable_name(name) {
                return Err(
                    "invalid environment variable reference: a name inside ${...} must match \
                     [A-Za-z_][A-Za-z0-9_]*; write $${ for a literal ${"
                        .to_owned(),
                );
            }
            match env(name) {
                None => return Err(format!("environment variable {name} is not set")),
                Some(v) if v.is_empty() => {
                    return Err(format!("environment variable {name} is set but empty"));
                }
                Some(v) => out.push_str(&v),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`, as in `${VAR}` and `env`.
pub(super) fn is_variable_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::*;

    #[test]
    fn dollar_escape_is_a_literal() {
        assert_eq!(expand_env("a$${B}c", &fake_env).unwrap(), "a${B}c");
        assert_eq!(
            expand_env("$${KB_TOKEN}", &fake_env).unwrap(),
            "${KB_TOKEN}"
        );
        assert_eq!(
            expand_env("$$${KB_TOKEN}", &fake_env).unwrap(),
            "$${KB_TOKEN}"
        );
        assert_eq!(expand_env("cost: $5, $", &fake_env).unwrap(), "cost: $5, $");
        assert_eq!(
            expand_env("${KB_TOKEN}${HOST}", &fake_env).unwrap(),
            "s3cr3t-tokentickets.example.com"
        );
        assert_eq!(expand_env("", &fake_env).unwrap(), "");
        // expanded values are not expanded again
        let env = |n: &str| (n == "A").then(|| "${B}".to_owned());
        assert_eq!(expand_env("${A}", &env).unwrap(), "${B}");
    }

    #[test]
    fn unset_env_variable() {
        assert_eq!(
            err(&one_target(
                "    headers:\n      Authorization: \"Bearer ${KB_TOKEN_MISSING}\"\n"
            )),
            "test.yml: targets[0].headers.Authorization: environment variable KB_TOKEN_MISSING is not set"
        );
        // the exact message from the brief, with an environment that lacks KB_TOKEN
        let e = Config::parse(
            &one_target("    headers:\n      Authorization: \"Bearer ${KB_TOKEN}\"\n"),
            "test.yml",
            &|_| None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "test.yml: targets[0].headers.Authorization: environment variable KB_TOKEN is not set"
        );
        assert_eq!(e.field(), Some("targets[0].headers.Authorization"));
    }

    #[test]
    fn empty_env_variable() {
        assert_eq!(
            err(&one_target(
                "    headers:\n      Authorization: \"Bearer ${EMPTY}\"\n"
            )),
            "test.yml: targets[0].headers.Authorization: environment variable EMPTY is set but empty"
        );
    }

    #[test]
    fn malformed_env_references() {
        assert_eq!(
            err(&one_target("    headers:\n      X-Key: \"${KB_TOKEN\"\n")),
            "test.yml: targets[0].headers.X-Key: unterminated ${ (missing '}'); write $${ for a literal ${"
        );
        let e = err(&one_target(&format!(
            "    headers:\n      X-Key: \"${{{SENTINEL}}}\"\n"
        )));
        assert_eq!(
            e,
            "test.yml: targets[0].headers.X-Key: invalid environment variable reference: a name inside ${...} must match [A-Za-z_][A-Za-z0-9_]*; write $${ for a literal ${"
        );
        assert_has(
            &err(&one_target("    headers:\n      X-Key: \"${}\"\n")),
            "invalid environment variable reference",
        );
        assert_has(
            &err(&one_target("    headers:\n      X-Key: \"${1A}\"\n")),
            "invalid environment variable reference",
        );
    }

    #[test]
    fn env_expansion_applies_only_to_url_and_headers() {
        // a target name or a duration with ${...} is taken literally (and then rejected)
        assert_has(
            &err("targets:\n  - name: ${HOST}\n    url: https://kb.example.com/\n"),
            "\"${HOST}\" is not a valid target name",
        );
        assert_has(
            &err(&one_target("    ping_interval: ${HOST}\n")),
            "invalid duration \"${HOST}\"",
        );
    }
}
