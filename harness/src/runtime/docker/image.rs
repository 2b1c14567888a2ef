//! The images, built locally with nothing pulled: `FROM scratch` plus one
//! binary and the shared libraries `ldd` says it loads (the dynamic loader,
//! libc, libgcc_s, libm…), each at the path the loader looks for it. The build
//! context is a tar made in memory; the tag is a hash of that tar, so an image
//! whose binary did not change is reused, and `epochal gc` can tell a stale
//! image from the current one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use testcontainers::bollard::Docker;
use testcontainers::bollard::query_parameters::BuildImageOptions;

use super::api::{LABEL_IMAGE, LABEL_PROJECT, docker_error};
use crate::runtime::postgres::PgBin;
use crate::runtime::{ClusterConfig, RuntimeError};

/// The images a cluster needs: the broker (the system's `program`), the
/// proxy, and etcd when the system has it.
pub struct Images {
    pub broker: ImageSpec,
    pub proxy: ImageSpec,
    pub etcd: Option<ImageSpec>,
}

impl Images {
    pub fn all(&self) -> impl Iterator<Item = &ImageSpec> {
        [&self.broker, &self.proxy].into_iter().chain(&self.etcd)
    }
}

/// The images of `config`'s system. The reference broker's image is
/// `epochal-broker` (the name `epochal gc` knows); another system's is
/// `epochal-<its name>`, so the two never take each other's tags.
pub fn specs(config: &ClusterConfig, program: PathBuf, etcd: Option<PathBuf>) -> Images {
    let system = &config.system;
    Images {
        broker: ImageSpec {
            name: if system.is_reference() {
                "broker".into()
            } else {
                repository_safe(&system.name)
            },
            binary: program,
            at: "/epochal-broker".into(),
            extra: Vec::new(),
        },
        proxy: ImageSpec {
            name: "proxy".into(),
            binary: config.proxy_bin(),
            at: "/epochal-proxy".into(),
            extra: Vec::new(),
        },
        etcd: etcd.map(|binary| ImageSpec {
            name: "etcd".into(),
            binary,
            at: "/usr/bin/etcd".into(),
            extra: Vec::new(),
        }),
    }
}

/// The image of this machine's PostgreSQL server (docker/postgres.rs runs it).
pub fn postgres(bin: &PgBin) -> ImageSpec {
    // Debian's layout: /usr/lib/postgresql/<major>/{bin,lib}, and the share
    // folder the server finds from its own path, /usr/share/postgresql/<major>.
    let root = bin.postgres.parent().and_then(Path::parent);
    let major = root.and_then(Path::file_name).map(PathBuf::from);
    let mut extra: Vec<PathBuf> = Vec::new();
    if let (Some(root), Some(major)) = (root, major) {
        extra.push(root.join("lib"));
        extra.push(Path::new("/usr/share/postgresql").join(major));
    }
    // The time zone initdb wrote into postgresql.conf (the host's, or UTC),
    // read from the system's data (Debian builds with system tzdata).
    extra.push("/usr/share/zoneinfo".into());
    // Its account by name, should the server look itself up.
    extra.extend(["/etc/passwd", "/etc/group"].map(PathBuf::from));
    extra.retain(|p| p.exists());
    ImageSpec {
        name: "postgres".into(),
        binary: bin.postgres.clone(),
        at: bin.postgres.display().to_string(),
        extra,
    }
}

/// A system's name as Docker takes it in a repository name: lowercase
/// letters, digits, `.`, `_` and `-`, anything else made a `-`.
fn repository_safe(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '_' | '-') => c,
            _ => '-',
        })
        .collect()
}

/// One image to make: its name (`epochal-<name>`), the binary, where the
/// binary goes inside the image (the entrypoint), and any other files the
/// program reads at run time, each at its own path.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub name: String,
    pub binary: PathBuf,
    pub at: String,
    /// Files, or folders taken whole, copied to the same path inside; an
    /// ELF file among them brings its libraries as the binary does.
    pub extra: Vec<PathBuf>,
}

/// A build context ready to send, and the tag it hashes to.
pub struct Context {
    pub tag: String,
    pub tar: Vec<u8>,
}

impl ImageSpec {
    pub fn repository(&self) -> String {
        format!("epochal-{}", self.name)
    }

    /// The tar: a Dockerfile and `rootfs/` holding the binary and its libraries.
    /// Every header is fixed (mode, owner, mtime 0) so equal inputs hash equal.
    pub fn context(&self) -> Result<Context, RuntimeError> {
        let io = |what: String| move |source| RuntimeError::Io { what, source };
        let mut files = BTreeMap::from([(
            self.at.trim_start_matches('/').to_owned(),
            self.binary.clone(),
        )]);
        let mut elves = vec![self.binary.clone()];
        for path in &self.extra {
            for file in files_under(path)? {
                if is_elf(&file)? {
                    elves.push(file.clone());
                }
                files.insert(inside(&file), file);
            }
        }
        for elf in &elves {
            for library in shared_libraries(elf)? {
                files.insert(inside(&library), library);
            }
        }
        let dockerfile = format!(
            "FROM scratch\nCOPY rootfs/ /\nLABEL {LABEL_PROJECT}=\"epochal\" {LABEL_IMAGE}=\"{}\"\nENTRYPOINT [\"{}\"]\n",
            self.name, self.at
        );
        let mut tar = tar::Builder::new(Vec::new());
        append(&mut tar, "Dockerfile", dockerfile.as_bytes(), 0o644)
            .map_err(io("writing the Dockerfile".into()))?;
        for (inside, host) in files {
            // Read through symlinks: the image holds a regular file at the path
            // the loader asks for.
            let bytes = std::fs::read(&host).map_err(io(format!("reading {}", host.display())))?;
            append(&mut tar, &format!("rootfs/{inside}"), &bytes, 0o755)
                .map_err(io(format!("adding {} to the image", host.display())))?;
        }
        let tar = tar
            .into_inner()
            .map_err(io("finishing the image context".into()))?;
        let hash = Sha256::digest(&tar);
        let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok(Context {
            tag: format!("{}:{hex}", self.repository()),
            tar,
        })
    }
}

/// A host path's place under the context's `rootfs/`.
fn inside(path: &Path) -> String {
    path.to_string_lossy().trim_start_matches('/').to_owned()
}

/// `path` if it is a file, else every file under it (symlinks to files
/// followed, symlinks to folders not), sorted.
fn files_under(path: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let io = |what: String| move |source| RuntimeError::Io { what, source };
    let kind =
        std::fs::symlink_metadata(path).map_err(io(format!("reading {}", path.display())))?;
    if !kind.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path).map_err(io(format!("listing {}", path.display())))?;
    for entry in entries {
        let entry = entry.map_err(io(format!("listing {}", path.display())))?;
        let child = entry.path();
        let is_dir = std::fs::metadata(&child).is_ok_and(|m| m.is_dir());
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        match (is_dir, is_link) {
            (true, false) => files.extend(files_under(&child)?),
            (true, true) => {}
            (false, _) => files.push(child),
        }
    }
    files.sort();
    Ok(files)
}

/// Whether the file starts with ELF's magic (a program or a library).
fn is_elf(path: &Path) -> Result<bool, RuntimeError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|source| RuntimeError::Io {
        what: format!("reading {}", path.display()),
        source,
    })?;
    Ok(file.read_exact(&mut magic).is_ok() && magic == *b"\x7fELF")
}

fn append(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, bytes)
}

/// The libraries `ldd` lists with a path: `name => /path (addr)` and the
/// loader's own `/path (addr)` line; the vDSO has no file and is skipped.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|source| RuntimeError::Io {
            what: format!("running ldd on {}", binary.display()),
            source,
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    if text.contains("not a dynamic executable") || text.contains("statically linked") {
        return Ok(Vec::new());
    }
    if !output.status.success() {
        return Err(RuntimeError::Missing(vec![format!(
            "the libraries of {} (ldd failed: {})",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )]));
    }
    libraries_listed(binary, &text)
}

/// The libraries in `ldd`'s listing of `binary`. Only the two shapes of a
/// loaded library count, each ending in its load address: `name => /path
/// (0x...)` and the loader's `/path (0x...)`. Anything else is ldd's talk:
/// the glibc it runs on says so of a binary built for a newer one (noida's
/// `.../noida: /lib/.../libc.so.6: weak version 'GLIBC_2.39' not found`),
/// and the loader runs it all the same.
fn libraries_listed(binary: &Path, listing: &str) -> Result<Vec<PathBuf>, RuntimeError> {
    let mut libraries = Vec::new();
    for line in listing.lines() {
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None if line.contains(" (0x") => line.split_whitespace().next(),
            None => None,
        };
        match path {
            Some(path) if path.starts_with('/') => libraries.push(PathBuf::from(path)),
            Some("not") => {
                return Err(RuntimeError::Missing(vec![format!(
                    "a library of {}: {}",
                    binary.display(),
                    line.trim()
                )]));
            }
            _ => {}
        }
    }
    Ok(libraries)
}

/// The bound on making one image (issue [reliability] point 5: every long
/// wait has a bound and names what it waited for). A cold build of the three
/// images takes seconds; a Docker engine that stops answering mid-build must
/// not hang a nightly run.
pub const IMAGE_BUILD_TIMEOUT: Duration = Duration::from_secs(600);

/// The image for `spec`, built unless its tag already exists; returns the tag.
pub async fn ensure(docker: &Docker, spec: &ImageSpec) -> Result<String, RuntimeError> {
    ensure_within(docker, spec, IMAGE_BUILD_TIMEOUT).await
}

/// [`ensure`], within `bound`: past it, a timeout naming the image.
///
/// The bound is a deadline checked before each request to the engine as well
/// as a timeout on it: `tokio::time::timeout` polls the work before its timer,
/// so an answer that came in while this thread was descheduled past the
/// deadline would otherwise count as in time (seen under a CPU hog with a zero
/// bound). Nothing starts once the deadline has passed.
pub async fn ensure_within(
    docker: &Docker,
    spec: &ImageSpec,
    bound: Duration,
) -> Result<String, RuntimeError> {
    let deadline = tokio::time::Instant::now() + bound;
    let context = spec.context()?;
    let tag = context.tag.clone();
    let timed_out = || RuntimeError::Timeout {
        what: format!("image {tag} ({}) checked or built", spec.repository()),
        timeout: bound,
        detail: Some("the Docker engine did not finish".into()),
    };
    tokio::time::timeout_at(deadline, build(docker, context, deadline, &timed_out))
        .await
        .map_err(|_| timed_out())?
}

/// Check the image exists, else build it; each request to the engine starts
/// only before `deadline` (else `timed_out()`).
async fn build(
    docker: &Docker,
    context: Context,
    deadline: tokio::time::Instant,
    timed_out: &(dyn Fn() -> RuntimeError + Sync),
) -> Result<String, RuntimeError> {
    let in_time = || {
        if tokio::time::Instant::now() >= deadline {
            return Err(timed_out());
        }
        Ok(())
    };
    in_time()?;
    if docker.inspect_image(&context.tag).await.is_ok() {
        return Ok(context.tag);
    }
    in_time()?;
    let options = BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(context.tag.clone()),
        rm: true,
        forcerm: true,
        ..Default::default()
    };
    let body = testcontainers::bollard::body_full(context.tar.into());
    let mut stream = docker.build_image(options, None, Some(body));
    let mut transcript = String::new();
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| docker_error(format!("building {}", context.tag), e))?;
        if let Some(line) = &info.stream {
            transcript.push_str(line);
        }
        if let Some(error) = info.error_detail.and_then(|d| d.message) {
            return Err(RuntimeError::ImageBuild {
                tag: context.tag,
                detail: format!("{error}\n{transcript}"),
            });
        }
    }
    in_time()?;
    docker
        .inspect_image(&context.tag)
        .await
        .map_err(|e| docker_error(format!("image {} after its build", context.tag), e))?;
    Ok(context.tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_holds_the_binary_its_loader_and_libc_and_hashes_stably() {
        let spec = ImageSpec {
            name: "test".into(),
            binary: PathBuf::from("/bin/true"),
            at: "/true".into(),
            extra: Vec::new(),
        };
        let (a, b) = (spec.context().unwrap(), spec.context().unwrap());
        assert_eq!(a.tag, b.tag);
        assert!(a.tag.starts_with("epochal-test:"));
        let mut archive = tar::Archive::new(a.tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(names.contains(&"Dockerfile".to_owned()), "{names:?}");
        assert!(names.contains(&"rootfs/true".to_owned()), "{names:?}");
        assert!(names.iter().any(|n| n.contains("ld-linux")), "{names:?}");
        assert!(names.iter().any(|n| n.ends_with("/libc.so.6")), "{names:?}");
    }

    #[test]
    fn ldd_talk_about_a_newer_glibc_is_no_library() {
        let listing = "/t/bin/noida: /lib/x86_64-linux-gnu/libc.so.6: weak version `GLIBC_2.39' \
                       not found (required by /t/bin/noida)
\tlinux-vdso.so.1 (0x00007f437f2e9000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f437f2b7000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f437e41e000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f437f2eb000)
";
        let libraries = libraries_listed(Path::new("/t/bin/noida"), listing).unwrap();
        let want = [
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ];
        assert_eq!(libraries, want.map(PathBuf::from));
        let missing = "\tlibfoo.so.1 => not found\n";
        let error = libraries_listed(Path::new("/t/x"), missing).unwrap_err();
        assert!(
            error.to_string().contains("libfoo.so.1 => not found"),
            "{error}"
        );
    }
}
