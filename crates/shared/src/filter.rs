//! Content filters: a small expression over a message's payload that an endpoint
//! (or a destination) takes a message by, beside its event types and channels.
//!
//! ```text
//! amount > 100 and (currency == "EUR" or currency in ["USD", "GBP"])
//! not exists(order.refund) and items[*].sku == "A-1"
//! ```
//!
//! The text is parsed here, at the API's edge (a 422 names what is wrong and
//! where), within bounds on its size, and compiled to a Postgres SQL/JSON path
//! predicate, which the fan-out statement evaluates (`store::fanout`): a message
//! a filter refuses makes no delivery, and the rule stays written once, in SQL.
//! Paths are evaluated in lax mode: a path through an array looks at each of its
//! items (`tags == "vip"` holds when any tag is), a missing path makes a
//! comparison false (and its `not` true), and a comparison of different types
//! (a string with a number) is neither, so the filter does not take the message.

use std::fmt::Write;

/// The most a filter's text may weigh, in bytes.
pub const MAX_LEN: usize = 1024;
/// The most comparisons (and `exists`) one filter holds.
const MAX_TERMS: usize = 32;
/// The deepest nesting of `not` and parentheses.
const MAX_DEPTH: usize = 16;
/// The most values of an `in` list.
const MAX_LIST: usize = 64;
/// The most steps of one path.
const MAX_STEPS: usize = 16;

/// A filter, checked: its text as given, and the predicate Postgres evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub text: String,
    pub path: String,
}

/// What is wrong with a filter, and where (a byte offset into its text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at {at}: {what}")]
pub struct Invalid {
    pub at: usize,
    pub what: String,
}

impl Filter {
    /// Parses and compiles `text`.
    pub fn parse(text: &str) -> Result<Filter, Invalid> {
        if text.len() > MAX_LEN {
            return Err(Invalid { at: MAX_LEN, what: format!("a filter is at most {MAX_LEN} bytes") });
        }
        let mut p = Parser { tokens: lex(text)?, next: 0, terms: 0, end: text.len() };
        let mut path = String::new();
        p.or(&mut path, 0)?;
        if let Some((at, t)) = p.tokens.get(p.next) {
            return Err(Invalid { at: *at, what: format!("expected `and`, `or` or the end, found {}", t.shown()) });
        }
        Ok(Filter { text: text.to_owned(), path })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Str(String),
    Num(String),
    Op(&'static str),
    Open,
    Close,
    OpenSquare,
    CloseSquare,
    Comma,
    Dot,
    Star,
}

impl Token {
    fn shown(&self) -> String {
        match self {
            Token::Word(w) => format!("`{w}`"),
            Token::Str(_) => "a string".into(),
            Token::Num(n) => format!("`{n}`"),
            Token::Op(o) => format!("`{o}`"),
            Token::Open => "`(`".into(),
            Token::Close => "`)`".into(),
            Token::OpenSquare => "`[`".into(),
            Token::CloseSquare => "`]`".into(),
            Token::Comma => "`,`".into(),
            Token::Dot => "`.`".into(),
            Token::Star => "`*`".into(),
        }
    }
}

const OPERATORS: &[&str] = &["==", "!=", "<=", ">=", "&&", "||", "<", ">", "=", "!"];

fn lex(text: &str) -> Result<Vec<(usize, Token)>, Invalid> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        let bad = |what: String| Invalid { at, what };
        match c {
            _ if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | '[' | ']' | ',' | '.' | '*' => {
                chars.next();
                out.push((
                    at,
                    match c {
                        '(' => Token::Open,
                        ')' => Token::Close,
                        '[' => Token::OpenSquare,
                        ']' => Token::CloseSquare,
                        ',' => Token::Comma,
                        '.' => Token::Dot,
                        _ => Token::Star,
                    },
                ));
            }
            '"' | '\'' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err(bad("a string is not closed".into())),
                        Some((_, q)) if q == c => break,
                        Some((_, '\\')) => match chars.next().map(|(_, e)| e) {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(e @ ('\\' | '"' | '\'')) => s.push(e),
                            _ => return Err(bad("a string has an escape other than \\n \\t \\\\ \\\" \\'".into())),
                        },
                        Some((_, ch)) => s.push(ch),
                    }
                }
                out.push((at, Token::Str(s)));
            }
            _ if c.is_ascii_digit() || c == '-' => {
                let mut n = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if !(d.is_ascii_alphanumeric() || matches!(d, '-' | '+' | '.')) {
                        break;
                    }
                    n.push(d);
                    chars.next();
                }
                // JSON's number syntax, as the payload's numbers are written.
                match serde_json::from_str::<serde_json::Number>(&n) {
                    Ok(v) if v.as_f64().is_some_and(f64::is_finite) => out.push((at, Token::Num(v.to_string()))),
                    _ => return Err(bad(format!("`{n}` is not a number"))),
                }
            }
            _ if c.is_alphabetic() || c == '_' || c == '$' => {
                let mut w = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if !(d.is_alphanumeric() || matches!(d, '_' | '$' | '-')) {
                        break;
                    }
                    w.push(d);
                    chars.next();
                }
                out.push((at, Token::Word(w)));
            }
            _ => {
                let rest = &text[at..];
                let Some(op) = OPERATORS.iter().find(|o| rest.starts_with(**o)) else {
                    return Err(bad(format!("`{c}` is not part of a filter")));
                };
                for _ in 0..op.len() {
                    chars.next();
                }
                out.push((at, Token::Op(op)));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    terms: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.next).map_or(self.end, |(at, _)| *at)
    }

    fn fail<T>(&self, what: impl Into<String>) -> Result<T, Invalid> {
        Err(Invalid { at: self.at(), what: what.into() })
    }

    fn found(&self) -> String {
        self.peek().map_or_else(|| "the end".into(), Token::shown)
    }

    fn word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(x)) if x.eq_ignore_ascii_case(w))
    }

    fn or(&mut self, out: &mut String, depth: usize) -> Result<(), Invalid> {
        self.joined(out, depth, "or", "||", Self::and)
    }

    fn and(&mut self, out: &mut String, depth: usize) -> Result<(), Invalid> {
        self.joined(out, depth, "and", "&&", Self::not)
    }

    /// `part (word part)*`, written `a OP b OP …`: jsonpath binds `!`, `&&` and
    /// `||` as this language does, so the parts need no parentheses of their own.
    fn joined(
        &mut self,
        out: &mut String,
        depth: usize,
        word: &str,
        op: &'static str,
        part: fn(&mut Self, &mut String, usize) -> Result<(), Invalid>,
    ) -> Result<(), Invalid> {
        let mut parts = vec![String::new()];
        part(self, &mut parts[0], depth)?;
        while self.word(word) || self.peek() == Some(&Token::Op(op)) {
            self.next += 1;
            let mut next = String::new();
            part(self, &mut next, depth)?;
            parts.push(next);
        }
        out.push_str(&parts.join(&format!(" {op} ")));
        Ok(())
    }

    fn not(&mut self, out: &mut String, depth: usize) -> Result<(), Invalid> {
        if depth > MAX_DEPTH {
            return self.fail(format!("a filter nests at most {MAX_DEPTH} deep"));
        }
        if self.word("not") || self.peek() == Some(&Token::Op("!")) {
            self.next += 1;
            let mut inner = String::new();
            self.not(&mut inner, depth + 1)?;
            write!(out, "!({inner})").expect("a String takes writes");
            return Ok(());
        }
        if self.peek() == Some(&Token::Open) {
            self.next += 1;
            let mut inner = String::new();
            self.or(&mut inner, depth + 1)?;
            if self.peek() != Some(&Token::Close) {
                return self.fail(format!("expected `)`, found {}", self.found()));
            }
            self.next += 1;
            write!(out, "({inner})").expect("a String takes writes");
            return Ok(());
        }
        self.term(out)
    }

    /// `exists(path)`, `path OP value` or `path [not] in [value, …]`.
    fn term(&mut self, out: &mut String) -> Result<(), Invalid> {
        self.terms += 1;
        if self.terms > MAX_TERMS {
            return self.fail(format!("a filter holds at most {MAX_TERMS} comparisons"));
        }
        if self.word("exists") && self.tokens.get(self.next + 1).map(|(_, t)| t) == Some(&Token::Open) {
            self.next += 2;
            let path = self.path()?;
            if self.peek() != Some(&Token::Close) {
                return self.fail(format!("expected `)` after the path, found {}", self.found()));
            }
            self.next += 1;
            write!(out, "exists({path})").expect("a String takes writes");
            return Ok(());
        }
        let path = self.path()?;
        let negated = self.word("not");
        if negated {
            self.next += 1;
            if !self.word("in") {
                return self.fail(format!("expected `in` after `not`, found {}", self.found()));
            }
        }
        if self.word("in") {
            self.next += 1;
            let values = self.list()?;
            // Each value is a comparison of its own when the filter runs.
            self.terms += values.len() - 1;
            if self.terms > MAX_TERMS {
                return self
                    .fail(format!("a filter holds at most {MAX_TERMS} comparisons (each value of a list counts)"));
            }
            let any: Vec<String> = values.iter().map(|v| format!("{path} == {v}")).collect();
            match negated {
                false => write!(out, "({})", any.join(" || ")),
                true => write!(out, "!({})", any.join(" || ")),
            }
            .expect("a String takes writes");
            return Ok(());
        }
        let op = match self.peek() {
            Some(Token::Op(op @ ("==" | "!=" | "<" | "<=" | ">" | ">="))) => *op,
            Some(Token::Op("=")) => "==",
            _ => {
                return self
                    .fail(format!("expected a comparison (== != < <= > >= in) after the path, found {}", self.found()))
            }
        };
        self.next += 1;
        let value = self.value()?;
        write!(out, "{path} {op} {value}").expect("a String takes writes");
        Ok(())
    }

    /// A path into the payload, as a jsonpath: `$."order"."items"[*]."sku"`.
    fn path(&mut self) -> Result<String, Invalid> {
        let mut out = String::from("$");
        let mut steps = 0;
        // An optional leading `$` (`$.amount`, as JSONPath writes it).
        if matches!(self.peek(), Some(Token::Word(w)) if w == "$") {
            self.next += 1;
            match self.peek() {
                Some(Token::Dot) => self.next += 1,
                Some(Token::OpenSquare) => {}
                _ => return self.fail("expected `.` or `[` after `$`"),
            }
        }
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                return self.fail(format!("a path has at most {MAX_STEPS} steps"));
            }
            // A first key that is no name: `["a b"].c`, `$["in"]`.
            let quoted_first = steps == 1 && self.peek() == Some(&Token::OpenSquare);
            match self.peek().cloned() {
                _ if quoted_first => {}
                Some(Token::Word(w)) if !w.contains('$') && !is_keyword(&w) => {
                    self.next += 1;
                    out.push('.');
                    out.push_str(&quoted(&w));
                }
                _ if steps == 1 => {
                    return self.fail(format!("expected a path into the payload, found {}", self.found()))
                }
                _ => return self.fail(format!("expected a name after `.`, found {}", self.found())),
            }
            // Subscripts: `[0]`, `[*]`, `["a key"]`.
            while self.peek() == Some(&Token::OpenSquare) {
                self.next += 1;
                match self.peek().cloned() {
                    Some(Token::Num(n)) if n.bytes().all(|b| b.is_ascii_digit()) && n.len() <= 9 => {
                        write!(out, "[{n}]").expect("a String takes writes")
                    }
                    Some(Token::Star) => out.push_str("[*]"),
                    Some(Token::Str(key)) => {
                        out.push('.');
                        out.push_str(&quoted(&key));
                    }
                    _ => return self.fail(format!("expected an index, `*` or a quoted name, found {}", self.found())),
                }
                self.next += 1;
                if self.peek() != Some(&Token::CloseSquare) {
                    return self.fail(format!("expected `]`, found {}", self.found()));
                }
                self.next += 1;
            }
            if self.peek() != Some(&Token::Dot) {
                return Ok(out);
            }
            self.next += 1;
        }
    }

    fn list(&mut self) -> Result<Vec<String>, Invalid> {
        if self.peek() != Some(&Token::OpenSquare) {
            return self.fail(format!("expected `[` to begin the list after `in`, found {}", self.found()));
        }
        self.next += 1;
        let mut values = vec![self.value()?];
        while self.peek() == Some(&Token::Comma) {
            self.next += 1;
            values.push(self.value()?);
            if values.len() > MAX_LIST {
                return self.fail(format!("an `in` list holds at most {MAX_LIST} values"));
            }
        }
        if self.peek() != Some(&Token::CloseSquare) {
            return self.fail(format!("expected `,` or `]` in the list, found {}", self.found()));
        }
        self.next += 1;
        Ok(values)
    }

    /// A literal: a number, a string, `true`, `false` or `null`.
    fn value(&mut self) -> Result<String, Invalid> {
        let v = match self.peek() {
            Some(Token::Num(n)) => n.clone(),
            Some(Token::Str(s)) => quoted(s),
            Some(Token::Word(w)) if matches!(w.as_str(), "true" | "false" | "null") => w.clone(),
            _ => {
                return self.fail(format!(
                    "expected a value (a number, a string, true, false or null), found {}",
                    self.found()
                ))
            }
        };
        self.next += 1;
        Ok(v)
    }
}

fn is_keyword(w: &str) -> bool {
    ["and", "or", "not", "in"].iter().any(|k| w.eq_ignore_ascii_case(k))
}

/// A jsonpath string literal: double-quoted, with every character that needs
/// it escaped (control characters as `\uXXXX`).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                write!(out, "\\u{:04x}", c as u32).expect("a String takes writes")
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
