//! From a response body to text an agent reads: HTML → main content as Markdown, PDF → text,
//! text kinds as they are.
//!
//! HTML goes through a readability pass (the article, without navigation, footers, scripts)
//! and then HTML → Markdown with GitHub-flavoured tables; a page readability finds no article
//! in is converted whole (scripts, styles and navigation dropped). PDFs are parsed on blocking
//! threads, at most [`MAX_PDF_JOBS`] at once, so hostile documents cannot take every thread.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// PDF conversions running at once; beyond it a fetch of a PDF waits (within its timeout).
pub const MAX_PDF_JOBS: usize = 2;

/// What a body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Html,
    Pdf,
    Text,
}

/// A converted body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    pub title: Option<String>,
    pub content: String,
}

/// The kind of a body from its `Content-Type` (the media type only), or by sniffing when the
/// type is missing or generic; `Err` names an unsupported type.
pub fn detect(content_type: Option<&str>, body: &[u8]) -> Result<Kind, String> {
    let media = content_type
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    match media.as_str() {
        "text/html" | "application/xhtml+xml" => return Ok(Kind::Html),
        "application/pdf" | "application/x-pdf" => return Ok(Kind::Pdf),
        "" | "application/octet-stream" | "binary/octet-stream" => {}
        m if m.starts_with("text/")
            || m == "application/json"
            || m.ends_with("+json")
            || m == "application/xml"
            || m.ends_with("+xml") =>
        {
            return Ok(Kind::Text)
        }
        other => {
            return Err(format!(
                "content type '{other}' is not supported (HTML, PDF and text are)"
            ))
        }
    }
    if body.starts_with(b"%PDF-") {
        return Ok(Kind::Pdf);
    }
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    if head.contains("<html") || head.contains("<!doctype html") {
        return Ok(Kind::Html);
    }
    if std::str::from_utf8(body).is_ok() {
        return Ok(Kind::Text);
    }
    Err("the body is binary and has no supported content type".into())
}

/// The main content of an HTML page as Markdown, and its title.
pub fn html_to_markdown(html: &str, url: &str) -> Converted {
    let article = dom_smoothie::Readability::new(html, Some(url), None)
        .ok()
        .and_then(|mut r| r.parse().ok())
        .filter(|a| !a.text_content.trim().is_empty());
    let (title, body) = match article {
        Some(a) => (Some(a.title.to_string()), a.content.to_string()),
        None => (page_title(html), html.to_string()),
    };
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "nav", "noscript", "iframe", "svg", "form",
        ])
        .build();
    let content = converter
        .convert(&body)
        .unwrap_or_else(|_| strip_tags(&body));
    Converted {
        title: title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
        content: tidy(&content),
    }
}

/// The text of a PDF, parsed on a blocking thread within `timeout`.
pub async fn pdf_to_text(
    bytes: Vec<u8>,
    jobs: &Arc<Semaphore>,
    timeout: Duration,
) -> Result<String, String> {
    let run = async {
        let _permit = jobs
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| "the PDF converter is shut down".to_string())?;
        tokio::task::spawn_blocking(move || {
            std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(&bytes))
                .map_err(|_| "the PDF could not be parsed".to_string())?
                .map_err(|e| format!("the PDF could not be read: {e}"))
        })
        .await
        .map_err(|_| "the PDF converter failed".to_string())?
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(text) => Ok(tidy(&text?)),
        Err(_) => Err(format!(
            "the PDF was not converted within {} s",
            timeout.as_secs_f64()
        )),
    }
}

/// The `<title>` of a page, if any.
fn page_title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let end = open_end + lower[open_end..].find("</title")?;
    Some(html[open_end..end].trim().to_string())
}

/// Text without tags, for the rare page the Markdown converter refuses.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Trailing spaces dropped and runs of blank lines collapsed to one.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_media_type_or_the_body() {
        assert_eq!(
            detect(Some("text/html; charset=utf-8"), b""),
            Ok(Kind::Html)
        );
        assert_eq!(detect(Some("application/pdf"), b""), Ok(Kind::Pdf));
        assert_eq!(detect(Some("text/markdown"), b"# x"), Ok(Kind::Text));
        assert_eq!(detect(Some("application/json"), b"{}"), Ok(Kind::Text));
        assert_eq!(detect(None, b"%PDF-1.4 ..."), Ok(Kind::Pdf));
        assert_eq!(
            detect(Some("application/octet-stream"), b"<!DOCTYPE html><html>"),
            Ok(Kind::Html)
        );
        assert_eq!(detect(None, b"plain words"), Ok(Kind::Text));
        let e = detect(Some("image/png"), b"\x89PNG").unwrap_err();
        assert!(e.contains("image/png"), "{e}");
        let e = detect(None, &[0xff, 0xfe, 0x00, 0x81]).unwrap_err();
        assert!(e.contains("binary"), "{e}");
    }

    #[test]
    fn a_page_without_an_article_is_converted_whole_without_scripts() {
        let c = html_to_markdown(
            "<html><head><title> Tiny </title><script>var secret=1</script></head><body><p>Hello <b>there</b></p></body></html>",
            "http://example.com/",
        );
        assert_eq!(c.title.as_deref(), Some("Tiny"));
        assert!(c.content.contains("Hello **there**"), "{}", c.content);
        assert!(!c.content.contains("secret"), "{}", c.content);
    }

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("a  \n\n\n\nb\n"), "a\n\nb");
    }
}
