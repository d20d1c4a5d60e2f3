//! Content-addressed artifacts: naming, safe reading (docs/design.md#l6-artifacts,
//! docs/design.md#r7-scope), durable writing, and the head/tail excerpt kept in an event whose full
//! text became an artifact (docs/design.md#l5-caps).

use crate::error::{Error, Result};
use crate::event::ArtifactRef;
use crate::format::names;
use crate::storage::{OpenMode, Storage};

/// The prefix of every artifact name.
pub const ARTIFACT_PREFIX: &str = "sha256-";

/// True when `name` is exactly `sha256-<64 lowercase hex>`: relative, no separators, no `..`.
pub fn is_valid_artifact_name(name: &str) -> bool {
    name.strip_prefix(ARTIFACT_PREFIX)
        .is_some_and(|hex| crate::hex::decode32(hex).is_some())
}

/// The artifact name for `content`.
pub fn artifact_name(content: &[u8]) -> String {
    format!(
        "{ARTIFACT_PREFIX}{}",
        crate::hex::encode(&crate::hex::sha256(content))
    )
}

fn relative_path(name: &str) -> String {
    format!("{}/{name}", names::ARTIFACTS)
}

/// Checks a reference before anything is opened: its name, and that the `artifacts/`
/// directory and the file both resolve (through symlinks) inside the conversation directory.
pub(crate) fn check_ref(st: &dyn Storage, name: &str) -> Result<String> {
    let refused = |why| Error::BadArtifactRef {
        name: name.to_string(),
        why,
    };
    if !is_valid_artifact_name(name) {
        return Err(refused("not sha256-<64 lowercase hex>"));
    }
    let path = relative_path(name);
    let io = crate::files::io_err(st, &path);
    let dir_inside = st.resolves_inside(names::ARTIFACTS, "").map_err(io)?;
    let io = crate::files::io_err(st, &path);
    if !dir_inside || !st.resolves_inside(&path, names::ARTIFACTS).map_err(io)? {
        // `resolves_inside` is false for a missing file too; say which it is.
        let io = crate::files::io_err(st, &path);
        let why = if !st.exists(&path).map_err(io)? {
            "no such artifact in this conversation"
        } else {
            "it resolves outside the conversation directory"
        };
        return Err(refused(why));
    }
    Ok(path)
}

/// Reads and verifies an artifact. A reference whose file is absent is [`Error::ArtifactMissing`]: the event that holds it is
/// in the ledger, so the artifact was lost (damage, not bad input).
pub(crate) fn read(st: &dyn Storage, r: &ArtifactRef) -> Result<Vec<u8>> {
    let buf = stored(st, &r.name)?.ok_or_else(|| Error::ArtifactMissing {
        name: r.name.clone(),
    })?;
    if artifact_name(&buf) != r.name || buf.len() as u64 != r.bytes {
        return Err(Error::ArtifactMismatch {
            name: r.name.clone(),
        });
    }
    Ok(buf)
}

/// The bytes stored under artifact name `name`, unchecked (the name is checked first); a
/// reference to an artifact not stored is refused ([`Error::BadArtifactRef`]: a commit
/// naming one is bad input).
pub(crate) fn read_stored(st: &dyn Storage, name: &str) -> Result<Vec<u8>> {
    stored(st, name)?.ok_or_else(|| Error::BadArtifactRef {
        name: name.to_string(),
        why: "no such artifact in this conversation",
    })
}

/// The bytes stored under artifact name `name` (checked first), `None` when absent.
fn stored(st: &dyn Storage, name: &str) -> Result<Option<Vec<u8>>> {
    if is_valid_artifact_name(name) {
        let path = relative_path(name);
        if !st.exists(&path).map_err(crate::files::io_err(st, &path))? {
            return Ok(None);
        }
    }
    let path = check_ref(st, name)?;
    let Some(file) = st
        .open(&path, OpenMode::Read)
        .map_err(crate::files::io_err(st, &path))?
    else {
        return Ok(None);
    };
    let len = file.len().map_err(crate::files::io_err(st, &path))?;
    let mut buf = vec![0u8; len as usize];
    file.read_at(0, &mut buf)
        .map_err(crate::files::io_err(st, &path))?;
    Ok(Some(buf))
}

/// A reference `r` in a commit to a stored artifact holding `content`: size and hash must
/// agree, or the commit would reference an artifact every later read rejects as tampered
/// (both engines apply this, `rules::check_artifact_ref`).
pub(crate) fn check_committed_ref(r: &ArtifactRef, content: &[u8]) -> Result<()> {
    if content.len() as u64 != r.bytes {
        return Err(Error::invalid(format!(
            "artifact {} holds {} bytes, the reference says {}",
            r.name,
            content.len(),
            r.bytes
        )));
    }
    if artifact_name(content) != r.name {
        return Err(Error::invalid(format!(
            "artifact {} does not match its hash",
            r.name
        )));
    }
    Ok(())
}

/// Stores `content` durably under its name (write to a temporary name, sync, rename, sync the
/// directory). Sets `sync_failed` when a sync failed: such a failure cannot be retried safely
/// (the page cache may claim data the disk lacks).
///
/// Without syncs, an intact copy already there is kept as is. With syncs it is written again:
/// a copy left by an earlier process is not known to be durable (it may have died between
/// the rename and the directory sync, run without syncs, or seen its sync fail, after which
/// the page cache still shows the data the disk lacks), and a commit must not reference it
/// until it is (docs/design.md#l6-artifacts).
pub(crate) fn write(
    st: &dyn Storage,
    content: &[u8],
    sync: bool,
    sync_failed: &mut bool,
) -> Result<ArtifactRef> {
    let name = artifact_name(content);
    let r = ArtifactRef {
        name: name.clone(),
        bytes: content.len() as u64,
    };
    let path = relative_path(&name);
    if !sync && read(st, &r).is_ok() {
        return Ok(r);
    }
    let tmp = format!("{}/.tmp-{name}", names::ARTIFACTS);
    let io = |p: &str| crate::files::io_err(st, p);
    // Never write through an `artifacts/` that leads elsewhere: the commit would reference
    // an artifact that every read then refuses (docs/design.md#l6-artifacts).
    let io_dir = crate::files::io_err(st, names::ARTIFACTS);
    let exists = st.exists(names::ARTIFACTS).map_err(io_dir)?;
    let io_dir = crate::files::io_err(st, names::ARTIFACTS);
    if exists && !st.resolves_inside(names::ARTIFACTS, "").map_err(io_dir)? {
        return Err(Error::BadArtifactRef {
            name,
            why: "artifacts/ resolves outside the conversation directory",
        });
    }
    ensure_dir(st, names::ARTIFACTS, sync, sync_failed)?;
    let mut file = crate::files::create_fresh(st, &tmp)?;
    file.set_len(0).map_err(io(&tmp))?;
    file.write_at(0, content).map_err(io(&tmp))?;
    if sync && let Err(e) = file.sync() {
        *sync_failed = true;
        return Err(io(&tmp)(e));
    }
    drop(file);
    st.rename(&tmp, &path).map_err(io(&path))?;
    if sync && let Err(e) = st.sync_dir(names::ARTIFACTS) {
        *sync_failed = true;
        return Err(io(names::ARTIFACTS)(e));
    }
    Ok(r)
}

/// Creates `dir` if missing (refusing a symlink or file of that name); when it was created and `sync` is set, syncs the conversation
/// directory so the new entry survives a crash.
pub(crate) fn ensure_dir(
    st: &dyn Storage,
    dir: &str,
    sync: bool,
    sync_failed: &mut bool,
) -> Result<()> {
    let io = crate::files::io_err;
    if st.is_dir(dir).map_err(io(st, dir))? {
        return Ok(());
    }
    // Anything else of that name (a symlink, even to a directory, or a file) makes
    // `create_dir` fail: nothing is ever written through it.
    st.create_dir(dir).map_err(io(st, dir))?;
    if sync && let Err(e) = st.sync_dir("") {
        *sync_failed = true;
        return Err(io(st, "")(e));
    }
    Ok(())
}

/// The text kept in an event whose full text became an artifact: the first and last
/// `min(2048, threshold / 4)` bytes (cut at character boundaries) around a marker line.
pub fn excerpt(text: &str, threshold: u64, name: &str) -> String {
    let keep = (threshold / 4).min(2048) as usize;
    let mut head_end = keep.min(text.len());
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len().saturating_sub(keep).max(head_end);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    format!(
        "{}\n[… {omitted} bytes omitted; full output in artifact {name}]\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_strictly() {
        let good = artifact_name(b"x");
        assert!(is_valid_artifact_name(&good));
        for bad in [
            "",
            "sha256-",
            "../x",
            "/etc/passwd",
            "sha256-../../x",
            &good.to_uppercase(),
        ] {
            assert!(!is_valid_artifact_name(bad), "{bad}");
        }
        assert!(!is_valid_artifact_name(&format!("{good}/..")));
    }

    #[test]
    fn excerpt_keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(10_000);
        let e = excerpt(&text, 16 * 1024, "sha256-x");
        assert!(e.starts_with('é') && e.ends_with('é'));
        assert!(e.len() < 4200);
        assert!(e.contains("bytes omitted"));
    }
}
