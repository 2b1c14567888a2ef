//! `epochal serve [STORE]`: the store, read-only, over HTTP on 127.0.0.1 —
//! Jepsen's `lein run serve` for our store. The home page is the store's
//! index (index.rs), drawn fresh on each visit so runs checked since the
//! server started show up; every other path is a file under the store or a
//! listing of a directory, so a run directory is browsed like a file manager:
//! its report, history, results, harness log and `nodes/`.
//!
//! What it must never do: answer anything but GET and HEAD, listen anywhere
//! but loopback, or hand out a byte from outside the store. Paths are decoded
//! and checked here, not by a library: each segment is percent-decoded on its
//! own and refused if it is empty, `.` or `..`, or holds a `/` or NUL once
//! decoded (so `%2e%2e`, `%2f` and `//abs` all stop here), and the path built
//! from what remains is canonicalized — every symlink resolved — and served
//! only if it is still under the store's own canonical path. The store's
//! `latest` link points inside and works; a link pointing out is refused.
//! Only regular files are opened: a FIFO under `nodes/` would hang a reader.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use tokio::io::AsyncReadExt;

use super::index;

/// How long open connections get to finish once asked to stop; past it the
/// server stops anyway (a browser streaming a large history must not keep
/// Ctrl-C waiting).
const DRAIN_MS_MAX: u64 = 3_000;

/// What one read of a file sends at most, in one body chunk.
const CHUNK_BYTES: usize = 64 * 1024;

/// A listener on 127.0.0.1 — never another address — on `port`, or on one
/// the system picks when `port` is 0.
pub fn bind(port: u16) -> io::Result<TcpListener> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port))
}

/// Resolves when the process gets SIGINT (Ctrl-C) or SIGTERM. The handlers
/// are installed by this call, before it returns, so a signal that comes
/// any time after is caught rather than killing the process.
pub fn stop_signals() -> io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

#[derive(Clone)]
struct Served {
    /// The store's canonical path: what every served path must lie under.
    root: Arc<PathBuf>,
    /// The store as the user named it, for the index's heading.
    shown: Arc<PathBuf>,
}

/// Serves `store` on `listener` until `stop` resolves, then lets open
/// connections finish for a bounded time.
pub async fn serve(
    store: &Path,
    listener: TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let served = Served {
        root: Arc::new(tokio::fs::canonicalize(store).await?),
        shown: Arc::new(store.to_owned()),
    };
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = Router::new().fallback(handle).with_state(served);
    let stopping = Arc::new(tokio::sync::Notify::new());
    let stopped = stopping.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        stop.await;
        // `notify_one` keeps the permit if nobody waits yet.
        stopped.notify_one();
    });
    tokio::select! {
        served = server.into_future() => served,
        () = async {
            stopping.notified().await;
            tokio::time::sleep(Duration::from_millis(DRAIN_MS_MAX)).await;
        } => Ok(()),
    }
}

/// Why a path is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It would leave the store, or is not a path we hand out at all: 403.
    Forbidden,
    /// Nothing is there: 404.
    NotFound,
}

/// A request path that resolved under the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Canonical: no symlink, no `..`.
    pub path: PathBuf,
    pub is_dir: bool,
}

/// The file or directory under `root` (canonical) that the raw request path
/// `raw` (still percent-encoded, as on the request line) names; see the module
/// docs for the rules. Touches the file system (canonicalize, stat).
pub fn resolve(root: &Path, raw: &str) -> Result<Resolved, Refused> {
    let rest = raw.strip_prefix('/').ok_or(Refused::Forbidden)?;
    let mut path = root.to_owned();
    if !rest.is_empty() {
        // A trailing slash (`dir/`) leaves one empty last segment, the only
        // empty one allowed: `//etc/passwd` and `a//b` are refused.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        for segment in rest.split('/') {
            let decoded: Vec<u8> = percent_encoding::percent_decode_str(segment).collect();
            let bad = decoded.is_empty()
                || decoded == b"."
                || decoded == b".."
                || decoded.iter().any(|&b| b == b'/' || b == 0);
            if bad {
                return Err(Refused::Forbidden);
            }
            path.push(OsStr::from_bytes(&decoded));
        }
    }
    let canonical = std::fs::canonicalize(&path).map_err(|_| Refused::NotFound)?;
    if !canonical.starts_with(root) {
        return Err(Refused::Forbidden);
    }
    let metadata = std::fs::metadata(&canonical).map_err(|_| Refused::NotFound)?;
    if !metadata.is_dir() && !metadata.is_file() {
        return Err(Refused::NotFound);
    }
    Ok(Resolved {
        path: canonical,
        is_dir: metadata.is_dir(),
    })
}

async fn handle(State(served): State<Served>, request: Request) -> Response {
    let head = request.method() == Method::HEAD;
    if !head && request.method() != Method::GET {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let raw = request.uri().path().to_owned();
    let root = served.root.clone();
    let lookup = raw.clone();
    // Canonicalizing touches the disk; the blocking pool does that.
    let resolved = tokio::task::spawn_blocking(move || resolve(&root, &lookup)).await;
    let resolved = match resolved {
        Ok(Ok(resolved)) => resolved,
        Ok(Err(Refused::Forbidden)) => {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: not a path in the store\n",
            );
        }
        Ok(Err(Refused::NotFound)) => return plain(StatusCode::NOT_FOUND, "not found\n"),
        Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "lookup failed\n"),
    };
    let page = if !resolved.is_dir {
        return file(&resolved.path, head).await;
    } else if !raw.ends_with('/') {
        // Relative links in a listing resolve against the directory only with
        // its trailing slash. `raw` passed the checks, so it is a plain path.
        let mut response = plain(StatusCode::PERMANENT_REDIRECT, "see the directory\n");
        if let Ok(location) = HeaderValue::from_str(&format!("{raw}/")) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return response;
    } else if resolved.path == *served.root {
        let shown = served.shown.clone();
        let store = served.root.clone();
        tokio::task::spawn_blocking(move || {
            index::scan(&store)
                .map(|runs| index::render(&shown, &runs))
                .map_err(|e| e.to_string())
        })
        .await
    } else {
        tokio::task::spawn_blocking(move || {
            listing(&resolved.path, &raw).map_err(|e| e.to_string())
        })
        .await
    };
    match page {
        Ok(Ok(html)) => {
            let mut response = plain(StatusCode::OK, "");
            let length = html.len();
            *response.body_mut() = if head {
                Body::empty()
            } else {
                Body::from(html)
            };
            set_type(&mut response, "text/html; charset=utf-8", length as u64);
            response
        }
        Ok(Err(e)) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "listing failed\n"),
    }
}

/// A regular file, streamed: a history can be large. The body stops at the
/// length the file had when opened, which the header promised, even while a
/// running run appends to it.
async fn file(path: &Path, head: bool) -> Response {
    let opened = match tokio::fs::File::open(path).await {
        Ok(file) => file.metadata().await.map(|m| (file, m.len())),
        Err(e) => Err(e),
    };
    let (file, length) = match opened {
        Ok(opened) => opened,
        Err(_) => return plain(StatusCode::NOT_FOUND, "not found\n"),
    };
    let mut response = plain(StatusCode::OK, "");
    if !head {
        let limited = file.take(length);
        let chunks = futures_util::stream::unfold(Some(limited), |state| async move {
            let mut reader = state?;
            let mut buffer = vec![0u8; CHUNK_BYTES];
            match reader.read(&mut buffer).await {
                Ok(0) => None,
                Ok(n) => {
                    buffer.truncate(n);
                    Some((Ok(axum::body::Bytes::from(buffer)), Some(reader)))
                }
                // One error ends the body; hyper then cuts the connection
                // short of the promised length, which the client notices.
                Err(e) => Some((Err::<axum::body::Bytes, io::Error>(e), None)),
            }
        });
        *response.body_mut() = Body::from_stream(chunks);
    }
    set_type(&mut response, content_type(path), length);
    response
}

/// The types a run directory holds; text kinds are served as text so a
/// browser shows them rather than downloading them.
pub fn content_type(path: &Path) -> &'static str {
    let extension = path.extension().and_then(OsStr::to_str).unwrap_or("");
    let stem = path.file_stem().map_or(&[][..], OsStr::as_bytes);
    // A Kafka segment (`00000000000000000000.log`) is binary, not a log.
    if !stem.is_empty() && stem.iter().all(u8::is_ascii_digit) {
        return "application/octet-stream";
    }
    match extension.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "json" => "application/json",
        // JSON lines and logs as text: a browser would download
        // `application/jsonl`, and reading the history is the point.
        "jsonl" | "log" | "toml" | "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "xml" => "application/xml",
        _ => "application/octet-stream",
    }
}

fn set_type(response: &mut Response, kind: &'static str, length: u64) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    // Runs change under a server that stays up: always ask again.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A directory's entries as links (dot-files left out, as the index leaves
/// them out), directories with a trailing slash, files with their size.
fn listing(dir: &Path, raw: &str) -> io::Result<String> {
    let mut entries: Vec<(String, String, Option<u64>)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.as_bytes().starts_with(b".") {
            continue;
        }
        // Followed, so `latest` shows as the directory it is; a dangling
        // link shows as a file the server will then answer 404 for.
        let metadata = std::fs::metadata(entry.path()).ok();
        let is_dir = metadata.as_ref().is_some_and(|m| m.is_dir());
        let mut href = index::url_component(name.as_bytes());
        let mut shown = name.to_string_lossy().into_owned();
        if is_dir {
            href.push('/');
            shown.push('/');
        }
        let size = metadata.filter(|m| m.is_file()).map(|m| m.len());
        entries.push((shown, href, size));
    }
    entries.sort();
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    let title = super::html::escape(&decoded);
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>{LISTING_STYLE}</style>\n</head>\n<body>\n\
         <h1>{title}</h1>\n<p><a href=\"/\">all runs</a> · <a href=\"../\">up</a></p>\n<ul>\n"
    );
    for (shown, href, size) in &entries {
        let size = size.map_or(String::new(), |n| format!(" <span>{n} bytes</span>"));
        let _ = writeln!(
            html,
            "<li><a href=\"{}\">{}</a>{size}</li>",
            super::html::escape(href),
            super::html::escape(shown)
        );
    }
    html.push_str("</ul>\n</body>\n</html>\n");
    Ok(html)
}

const LISTING_STYLE: &str = "\
body{font:14px/1.5 system-ui,sans-serif;margin:1.5em}\
h1{font-size:1.2em;font-family:monospace}\
ul{list-style:none;padding-left:0;font-family:monospace}\
span{color:#777;margin-left:1em}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_that_could_leave_the_store_are_refused_before_any_lookup() {
        let store = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(store.path()).unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        for raw in [
            "/..",
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc%2Fpasswd",
            "/a/%2fetc%2fpasswd",
            "//etc/passwd",
            "/a//b",
            "/./a",
            "/a%00b",
            "etc/passwd",
        ] {
            assert_eq!(resolve(&root, raw), Err(Refused::Forbidden), "{raw}");
        }
        let a = resolve(&root, "/a/").unwrap();
        assert_eq!((a.path, a.is_dir), (root.join("a"), true));
        assert_eq!(resolve(&root, "/").unwrap().path, root);
        assert_eq!(resolve(&root, "/missing"), Err(Refused::NotFound));
    }

    #[test]
    fn text_kinds_are_shown_not_downloaded() {
        assert_eq!(
            content_type(Path::new("history.jsonl")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("results.json")), "application/json");
        assert_eq!(
            content_type(Path::new("x/report.html")),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            content_type(Path::new("b1/broker.log")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type(Path::new("00000000000000000000.log")),
            "application/octet-stream"
        );
        assert_eq!(
            content_type(Path::new("leader-epoch-checkpoint")),
            "application/octet-stream"
        );
    }
}
