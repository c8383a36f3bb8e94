//! `sasl.jaas.config`, the Java client's SASL login setting, read as the
//! Java client reads it: one login module, its control flag, then
//! `name=value` options up to a `;`. A value is a word, or quoted with `"`
//! or `'` with Java's escapes (`\"`, `\\`, `\n`, …), as Java's
//! `StreamTokenizer` reads them in `JaasConfig`.

/// A parsed `sasl.jaas.config`: the login module and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Jaas {
    /// The login module's class name.
    pub module: String,
    /// The options, in order.
    pub options: Vec<(String, String)>,
}

impl Jaas {
    /// The value of option `name`.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Java's login modules Courier speaks, and the SASL mechanisms each
/// serves.
pub(super) const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
pub(super) const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
pub(super) const OAUTHBEARER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Parses `text`; the error is the reason alone.
pub(super) fn parse(text: &str) -> Result<Jaas, String> {
    let mut t = Tokens {
        chars: text.chars().peekable(),
    };
    let module = match t.next()? {
        Some(Token::Word(w)) => w,
        _ => return Err("expected a login module's class name first".into()),
    };
    match t.next()? {
        Some(Token::Word(flag))
            if ["required", "requisite", "sufficient", "optional"]
                .iter()
                .any(|f| f.eq_ignore_ascii_case(&flag)) => {}
        _ => {
            return Err(format!(
            "expected a control flag (required, requisite, sufficient or optional) after {module}"
        ))
        }
    }
    let mut options = Vec::new();
    loop {
        let name = match t.next()? {
            Some(Token::Semicolon) => break,
            Some(Token::Word(name)) => name,
            Some(Token::Equals) | Some(Token::Quoted(_)) => {
                return Err("expected an option name".into())
            }
            None => return Err("expected ';' at the end of the login module's options".into()),
        };
        if t.next()? != Some(Token::Equals) {
            return Err(format!("expected '=' after option {name}"));
        }
        let value = match t.next()? {
            Some(Token::Word(v)) | Some(Token::Quoted(v)) => v,
            _ => return Err(format!("expected a value for option {name}")),
        };
        options.push((name, value));
    }
    if t.next()?.is_some() {
        return Err(
            "expected one login module (sasl.jaas.config takes exactly one, as in Java)".into(),
        );
    }
    Ok(Jaas { module, options })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

struct Tokens<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Tokens<'_> {
    fn next(&mut self) -> Result<Option<Token>, String> {
        while self.chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(c) = self.chars.next() else {
            return Ok(None);
        };
        Ok(Some(match c {
            '=' => Token::Equals,
            ';' => Token::Semicolon,
            '"' | '\'' => Token::Quoted(self.quoted(c)?),
            c => {
                let mut w = String::from(c);
                while let Some(c) = self
                    .chars
                    .next_if(|c| !c.is_whitespace() && !matches!(c, '=' | ';' | '"' | '\''))
                {
                    w.push(c);
                }
                Token::Word(w)
            }
        }))
    }

    /// A quoted value after its opening `quote`, with `StreamTokenizer`'s
    /// escapes.
    fn quoted(&mut self, quote: char) -> Result<String, String> {
        let mut s = String::new();
        loop {
            match self.chars.next() {
                None => return Err(format!("a value opened with {quote} is not closed")),
                Some(c) if c == quote => return Ok(s),
                Some('\\') => match self.chars.next() {
                    None => return Err(format!("a value opened with {quote} is not closed")),
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('r') => s.push('\r'),
                    Some('b') => s.push('\u{8}'),
                    Some('f') => s.push('\u{c}'),
                    Some('a') => s.push('\u{7}'),
                    Some('v') => s.push('\u{b}'),
                    Some(d @ '0'..='7') => {
                        let mut n = d.to_digit(8).unwrap_or(0);
                        // Up to three octal digits, at most \377.
                        for _ in 0..2 {
                            match self.chars.peek().and_then(|c| c.to_digit(8)) {
                                Some(x) if n * 8 + x <= 0o377 => {
                                    n = n * 8 + x;
                                    self.chars.next();
                                }
                                _ => break,
                            }
                        }
                        s.push(char::from_u32(n).unwrap_or('\u{fffd}'));
                    }
                    Some(other) => s.push(other),
                },
                Some(c) => s.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_spellings_parse() {
        // Confluent Cloud's (single quotes), and the common double quotes.
        for text in [
            "org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY' password='SE\"CRET';",
            "org.apache.kafka.common.security.plain.PlainLoginModule   required\n  username=\"KEY\"\n  password=\"SE\\\"CRET\";",
        ] {
            let j = parse(text).unwrap();
            assert_eq!(j.module, PLAIN);
            assert_eq!(j.option("username"), Some("KEY"));
            assert_eq!(j.option("password"), Some("SE\"CRET"), "{text}");
        }
        let j = parse("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule Required unsecuredLoginStringClaim_sub=alice clientId=\"c\\\\1\" scope='a b';").unwrap();
        assert_eq!(j.module, OAUTHBEARER);
        assert_eq!(j.option("unsecuredLoginStringClaim_sub"), Some("alice"));
        assert_eq!(j.option("clientId"), Some("c\\1"));
        assert_eq!(j.option("scope"), Some("a b"));
        assert_eq!(
            parse("M required a=\"\\101\\n\";").unwrap().option("a"),
            Some("A\n")
        );
    }

    #[test]
    fn malformed_text_is_an_error_naming_what_is_missing() {
        for (text, want) in [
            ("", "class name"),
            ("M username=x;", "control flag"),
            ("M required username=x", "';'"),
            ("M required username x;", "'='"),
            ("M required username=;", "value for option username"),
            ("M required password=\"open;", "not closed"),
            ("M required; N required;", "one login module"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
