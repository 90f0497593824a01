//! Chat templates: the GGUF's `tokenizer.chat_template` (a Hugging Face style Jinja template)
//! rendered with `minijinja`, set up the way llama.cpp's own template engine renders it.
//!
//! Owns: the Jinja environment (`trim_blocks` and `lstrip_blocks` on, as in llama.cpp and
//! Hugging Face; `raise_exception`, `strftime_now`, loop controls, `tojson`, Python string and
//! dict methods such as `.strip()`/`.items()` through minijinja-contrib's pycompat) and the
//! template context llama.cpp passes: `messages` (list of `{role, content}`), `bos_token` and
//! `eos_token` (the BOS/EOS pieces), `add_generation_prompt` (only defined when true) and
//! `enable_thinking = true`.
//! Invariant: [`ChatTemplate::render`] returns the prompt string llama.cpp would tokenize for
//! the same messages: like llama.cpp it drops a leading BOS text when the tokenizer adds BOS
//! itself (and a trailing EOS text when it adds EOS), so the caller encodes the result with
//! `add_special = true, parse_special = true`. [`ChatTemplate::render_raw`] keeps the
//! template's output untouched.

use std::collections::BTreeMap;

use minijinja::{Environment, Error, ErrorKind, Value};
use muser_gguf::{tokenizer as key, Gguf};

use crate::error::TokenizerError;
use crate::Tokenizer;

/// The ChatML template llama.cpp falls back to when a GGUF has no `tokenizer.chat_template`.
pub const CHATML_TEMPLATE: &str = "{%- for message in messages -%}\n\
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n\
{%- endfor -%}\n\
{%- if add_generation_prompt -%}\n\
{{- '<|im_start|>assistant\\n' -}}\n\
{%- endif -%}";

const NAME: &str = "chat_template";

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    strip_bos: bool,
    strip_eos: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("source_len", &self.source.len())
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The GGUF's `tokenizer.chat_template`, compiled; `Ok(None)` when the key is absent
    /// (llama.cpp then uses ChatML: see [`CHATML_TEMPLATE`]).
    pub fn from_gguf(g: &Gguf, tok: &Tokenizer) -> Result<Option<ChatTemplate>, TokenizerError> {
        match g.opt_str(key::CHAT_TEMPLATE)? {
            None => Ok(None),
            Some(src) => ChatTemplate::new(src, tok).map(Some),
        }
    }

    /// Compile `source` for `tok` (BOS/EOS texts and add-BOS/EOS flags come from it).
    pub fn new(source: &str, tok: &Tokenizer) -> Result<ChatTemplate, TokenizerError> {
        let piece = |id: Option<u32>| {
            id.map(|id| String::from_utf8_lossy(tok.piece(id, true)).into_owned())
                .unwrap_or_default()
        };
        ChatTemplate::with_tokens(
            source,
            &piece(tok.bos()),
            &piece(tok.eos()),
            tok.add_bos(),
            tok.add_eos(),
        )
    }

    /// Compile `source` with explicit BOS/EOS texts; `add_bos`/`add_eos`: whether the
    /// tokenizer adds them itself (then [`ChatTemplate::render`] strips them).
    pub fn with_tokens(
        source: &str,
        bos_token: &str,
        eos_token: &str,
        add_bos: bool,
        add_eos: bool,
    ) -> Result<ChatTemplate, TokenizerError> {
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(TokenizerError::TemplateSyntax)?,
        );
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(NAME, source.to_owned())
            .map_err(TokenizerError::TemplateSyntax)?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            strip_bos: add_bos,
            strip_eos: add_eos,
        })
    }

    /// The template source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt llama.cpp would build from `messages` (see the module docs): encode it with
    /// `add_special = true, parse_special = true`.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        let mut s = self.render_raw(messages, add_generation_prompt)?;
        if self.strip_bos && !self.bos_token.is_empty() && s.starts_with(&self.bos_token) {
            s.drain(..self.bos_token.len());
        }
        if self.strip_eos && !self.eos_token.is_empty() && s.ends_with(&self.eos_token) {
            s.truncate(s.len() - self.eos_token.len());
        }
        Ok(s)
    }

    /// Exactly what the template prints.
    pub fn render_raw(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| {
                let mut o = BTreeMap::new();
                o.insert("role", Value::from(m.role.as_str()));
                o.insert("content", Value::from(m.content.as_str()));
                Value::from(o)
            })
            .collect();
        let mut ctx = BTreeMap::new();
        ctx.insert("messages", Value::from(msgs));
        ctx.insert("bos_token", Value::from(self.bos_token.as_str()));
        ctx.insert("eos_token", Value::from(self.eos_token.as_str()));
        ctx.insert("enable_thinking", Value::from(true));
        if add_generation_prompt {
            ctx.insert("add_generation_prompt", Value::from(true));
        }
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(TokenizerError::TemplateRender)?;
        tmpl.render(Value::from(ctx))
            .map_err(TokenizerError::TemplateRender)
    }
}

/// `raise_exception(msg)`: abort rendering with the template's message.
fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

/// `strftime_now(format)`: the current UTC time formatted with a subset of C `strftime`
/// (`%Y %y %m %d %e %H %I %M %S %p %j %a %A %b %B %h %F %T %D %%`; other sequences are kept
/// verbatim). llama.cpp uses local time; Muser's machines run in UTC.
fn strftime_now(format: String) -> Result<Value, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(Value::from(strftime(&format, secs)))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Civil date of a day count since 1970-01-01 (proleptic Gregorian): (year, month 1..=12,
/// day 1..=31).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Format `secs` since the Unix epoch (UTC).
pub(crate) fn strftime(format: &str, secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (y, mo, d) = civil(days);
    let weekday = (days + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let jan1 = civil_to_days(y, 1, 1);
    let yday = days - jan1 + 1;
    let month = MONTHS[(mo - 1) as usize];
    let day = DAYS[weekday];
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let mut out = String::new();
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{mo:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('I') => out.push_str(&format!("{h12:02}")),
            Some('M') => out.push_str(&format!("{mi:02}")),
            Some('S') => out.push_str(&format!("{s:02}")),
            Some('p') => out.push_str(if h < 12 { "AM" } else { "PM" }),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('a') => out.push_str(&day[..3]),
            Some('A') => out.push_str(day),
            Some('b') | Some('h') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('F') => out.push_str(&format!("{y}-{mo:02}-{d:02}")),
            Some('T') => out.push_str(&format!("{h:02}:{mi:02}:{s:02}")),
            Some('D') => out.push_str(&format!("{mo:02}/{d:02}/{:02}", y.rem_euclid(100))),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 of a civil date.
fn civil_to_days(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_known_dates() {
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", 0), "1970-01-01 00:00:00");
        // 2024-02-29 13:05:09 UTC, a Thursday, day 60 of the year.
        let t = 1_709_211_909;
        assert_eq!(strftime("%d %b %Y", t), "29 Feb 2024");
        assert_eq!(
            strftime("%A %B %e %j %I%p %%", t),
            "Thursday February 29 060 01PM %"
        );
        assert_eq!(strftime("%F %T %q", t), "2024-02-29 13:05:09 %q");
        for days in [-1000i64, 0, 59, 365, 11_016, 20_000, 100_000] {
            let (y, m, d) = civil(days);
            assert_eq!(civil_to_days(y, m, d), days);
        }
    }

    #[test]
    fn raise_exception_is_an_error() {
        let t = ChatTemplate::with_tokens(
            "{% if messages | length == 0 %}{{ raise_exception('no messages') }}{% endif %}ok",
            "<s>",
            "</s>",
            true,
            false,
        )
        .expect("compiles");
        let err = t.render(&[], false).expect_err("raises");
        assert!(err.to_string().contains("no messages"), "{err}");
        assert_eq!(
            t.render(&[ChatMessage::new("user", "hi")], false)
                .expect("renders"),
            "ok"
        );
    }

    #[test]
    fn loop_controls_methods_and_blocks() {
        let src = "{% for m in messages %}\n  {% if m.role == 'skip' %}{% continue %}{% endif %}\n\
                   [{{ m.content.strip() | upper }}]\n{% if loop.index == 3 %}{% break %}{% endif %}\n\
                   {% endfor %}";
        let t = ChatTemplate::with_tokens(src, "", "", false, false).expect("compiles");
        let msgs = [
            ChatMessage::new("user", " a "),
            ChatMessage::new("skip", "x"),
            ChatMessage::new("user", "b"),
            ChatMessage::new("user", "c"),
        ];
        assert_eq!(t.render(&msgs, false).expect("renders"), "[A]\n[B]\n");
    }

    #[test]
    fn syntax_error_is_typed() {
        let err = ChatTemplate::with_tokens("{% for %}", "", "", false, false).expect_err("bad");
        assert!(matches!(err, TokenizerError::TemplateSyntax(_)));
    }
}
