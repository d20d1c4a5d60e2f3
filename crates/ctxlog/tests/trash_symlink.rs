//! `erase --all` renames the conversation directory to `.erasing-<name>-<pid>` in the store's root
//! and then removes every `.erasing-*` entry (the symlink and path catalogue in
//! `docs/reliability.md`). A symlink planted at the trash name, or an `.erasing-*` symlink left in
//! the root, must never make the erasure remove or write anything outside the store: `rename(2)`
//! does not follow its new name (a directory cannot replace a link), and the sweep removes a link
//! itself, not what it points at.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxlog::Store;
use ctxlog::ops::{EraseRequest, EraseTarget};

fn erase_all(store: &Store, name: &str) -> ctxlog::Result<ctxlog::ops::EraseResponse> {
    store.erase(&EraseRequest {
        conversation: name.into(),
        target: EraseTarget::All,
        reason: String::new(),
    })
}

/// A directory outside the store holding a file that must survive.
fn victim_dir(tmp: &std::path::Path) -> std::path::PathBuf {
    let outside = tmp.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), b"precious").unwrap();
    outside
}

fn assert_untouched(outside: &std::path::Path) {
    assert_eq!(
        std::fs::read(outside.join("keep.txt")).unwrap(),
        b"precious"
    );
    assert_eq!(std::fs::read_dir(outside).unwrap().count(), 1);
}

#[test]
fn a_symlink_at_the_trash_name_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let outside = victim_dir(tmp.path());
    let store = Store::open(&root).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    conv.commit_json(br#"{"user":"secret narwhal-9931","assistant":"ok"}"#, None)
        .unwrap();
    drop(conv);
    let trash = root.join(format!(".erasing-chat-{}", std::process::id()));
    std::os::unix::fs::symlink(&outside, &trash).unwrap();

    let result = erase_all(&store, "chat");
    assert_untouched(&outside);
    match result {
        // Refused: the conversation is still whole, and a retry (the link swept) succeeds.
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "{e}");
            assert!(root.join("chat/ledger.log").exists());
        }
        Ok(_) => assert!(!root.join("chat").exists()),
    }
    let _ = erase_all(&store, "chat");
    assert_untouched(&outside);
}

#[test]
fn a_stale_trash_symlink_is_removed_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let outside = victim_dir(tmp.path());
    let store = Store::open(&root).unwrap();
    let mut conv = store.conversation("chat").unwrap();
    conv.commit_json(br#"{"user":"hello","assistant":"ok"}"#, None)
        .unwrap();
    drop(conv);
    let planted = root.join(".erasing-other-1");
    std::os::unix::fs::symlink(&outside, &planted).unwrap();

    erase_all(&store, "chat").unwrap();
    assert_untouched(&outside);
    assert!(!root.join("chat").exists());
    assert!(
        std::fs::symlink_metadata(&planted).is_err(),
        "the link was not swept"
    );
}
