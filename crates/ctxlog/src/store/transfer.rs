//! Import and export as operations of the [`Store`]: the parsing and planning are
//! [`crate::transfer`]'s (pure: bytes in, checked plans out); here the plans are written,
//! chunk by chunk through [`Store::commit`], and a conversation is exported from a snapshot.

use ctxlog_ledger::rules::Tombstone;

use crate::transfer::{ImportFormat, Plan, Step, parse, plan, write_export};
use crate::{ConversationName, Error, ErrorClass, Result, Store};

impl Store {
    /// Writes one step of an import: a chunk through [`crate::Store::commit`] (redacted, by
    /// its idempotency id), a tombstone appended as it was.
    fn import_step(&self, name: &str, step: Step) -> Result<ctxlog_ledger::CommitReceipt> {
        match step {
            Step::Commit(commit) => self.commit(&crate::ops::CommitRequest {
                conversation: name.to_string(),
                commit,
            }),
            Step::Tombstone(t) => self.append_tombstone(name, &t),
        }
    }

    /// Refuses, before anything is written, an export with erasures into a conversation that
    /// already holds other events: its tombstones name their seqs, which must stay the same.
    /// Re-running the same import is fine: after it finished or was interrupted past its first
    /// tombstone (which then stands where it belongs), or was interrupted before it (the
    /// conversation holds the leading commits of this same input; they are replayed). An input
    /// that begins with a tombstone continues a conversation exactly at its next seq (a gap
    /// filled: the seqs stay the same); anywhere else it is refused naming that next seq.
    fn check_import_target(&self, plan: &Plan) -> Result<()> {
        let Some(first) = plan.steps.iter().find_map(|s| match s {
            Step::Tombstone(t) => Some(t),
            Step::Commit(..) => None,
        }) else {
            return Ok(());
        };
        let name = plan.name.to_string();
        let last = match self.read(&name, |s| Ok(s.ledger().last_seq())) {
            Ok(last) => last,
            Err(Error::NotFound { .. }) => 0,
            Err(e) => return Err(e),
        };
        let leads = matches!(plan.steps.first(), Some(Step::Tombstone(_)));
        if last == 0 && !leads {
            return Ok(());
        }
        if last >= first.to {
            let stored = self.read(&name, |s| Ok(s.ledger().events(first.from..=first.from)?))?;
            let same = stored.first().and_then(|e| Tombstone::of(e.seq, &e.body));
            // Stored as this import wrote it: with its reason redacted.
            if same.as_ref() == Some(&*self.redactor().redact_tombstone(first)) {
                return Ok(());
            }
        }
        if last < first.from && !leads && self.holds_leading_commits(&name, plan, last)? {
            return Ok(());
        }
        // An input that begins with its tombstone continues the conversation at its next seq
        // (a gap filled): every seq stays the same.
        if leads {
            if first.from == last + 1 {
                return Ok(());
            }
            return Err(Error::BadInput {
                reason: format!(
                    "record 1: the tombstone of seqs {}-{} must start at {name:?}'s next seq ({})",
                    first.from,
                    first.to,
                    last + 1
                ),
            });
        }
        Err(Error::BadInput {
            reason: format!(
                "{name:?} already holds {last} events: an export with erased ranges (the first \
                 is seqs {}-{}) imports only into a new conversation, where its seqs stay the \
                 same, or continues this one when it begins with a tombstone at its next seq \
                 ({})",
                first.from,
                first.to,
                last + 1
            ),
        })
    }

    /// True when the `last` events of `name` are the leading commits of `plan`, written by an
    /// import of the same input: the commit of the plan that ends at seq `last` is there, by
    /// its id (which names the input's hash and the chunk), at the seqs the plan gives it.
    /// The commits before it are checked by their replay (a different one is a conflict,
    /// refused before anything is written).
    fn holds_leading_commits(&self, name: &str, plan: &Plan, last: u64) -> Result<bool> {
        let mut end = 0;
        for step in &plan.steps {
            let Step::Commit(commit) = step else {
                break;
            };
            let start = end + 1;
            end += commit.events.len() as u64;
            if end < last {
                continue;
            }
            let Some(id) = commit.id.as_deref().filter(|_| end == last) else {
                break; // `last` falls inside this commit: not an import's prefix
            };
            let seqs = self.write(name, |handle| handle.commit_seqs(id))?;
            return Ok(seqs == Some((start, end)));
        }
        Ok(false)
    }

    /// Writes every event of a conversation to `out` as JSON Lines (docs/export-import.md; the format is in
    /// [`crate::transfer`]): seq, time, kind and content, tombstones included, artifacts
    /// inlined. Reads a snapshot: commits made meanwhile are not included.
    ///
    /// # Errors
    /// [`Error::NotFound`]; ledger reads; I/O on `out`.
    pub fn export(
        &self,
        request: &crate::ops::ExportRequest,
        out: &mut dyn std::io::Write,
    ) -> Result<crate::ops::ExportResponse> {
        let in_conversation = |e: Error| e.in_conversation(&request.conversation);
        if request.salvage {
            return self.salvage(request, out);
        }
        let snapshot = self
            .snapshot(&request.conversation)
            .map_err(in_conversation)?;
        let (events, bytes) = write_export(snapshot.ledger(), out).map_err(in_conversation)?;
        Ok(crate::ops::ExportResponse {
            conversation: request.conversation.clone(),
            events,
            bytes,
            damaged: 0,
        })
    }

    /// The salvage of a conversation (an export with `salvage` set): every intact record,
    /// the damaged ranges marked; reads only.
    fn salvage(
        &self,
        request: &crate::ops::ExportRequest,
        out: &mut dyn std::io::Write,
    ) -> Result<crate::ops::ExportResponse> {
        let name = ConversationName::new(&request.conversation)?;
        let mut bytes = 0;
        let mut failed = None;
        let report = self.backend.salvage(&name, &mut |item| {
            match crate::transfer::write_salvaged(item, out) {
                Ok((_, n)) => bytes += n,
                Err(e) => {
                    // Carried out as the error below: the visit's own type is the ledger's.
                    failed = Some(e);
                    return Err(ctxlog_ledger::Error::Poisoned);
                }
            }
            Ok(())
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let report = report?;
        out.flush().map_err(|source| Error::Io {
            path: "<export output>".into(),
            source,
        })?;
        Ok(crate::ops::ExportResponse {
            conversation: request.conversation.clone(),
            events: report.events,
            bytes,
            damaged: report.damaged.len() as u64,
        })
    }

    /// Imports `data` (docs/export-import.md): parses and checks every record first (a bad one is named by
    /// line or index and nothing is written), then commits each conversation in chunks whose
    /// ids derive from `data`, and an export's tombstones as they were, so importing the same
    /// input again writes nothing. A dataset's sample that the ledger's rules refuse (session
    /// dates going backwards, a first time before the conversation's last event) is listed in
    /// `failed` with nothing of it written; the other samples are imported. `progress` is
    /// called after each chunk.
    ///
    /// ```
    /// use ctxlog::ops::{ExportRequest, ImportRequest};
    /// use ctxlog::transfer::ImportFormat;
    /// # fn main() -> ctxlog::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = ctxlog::Store::open(dir.path())?;
    /// let chat = br#"[{"role":"system","content":"Be brief."},
    ///   {"role":"user","content":"What is 2+2?","ts":"2023-05-08T13:56:00Z"},
    ///   {"role":"assistant","content":"4"}]"#;
    /// let request = ImportRequest { conversation: Some("chat".into()), format: ImportFormat::OpenaiChat };
    /// let done = store.import(&request, chat, &mut |_| {})?;
    /// assert_eq!(done.events_written, 3);
    /// assert_eq!(store.import(&request, chat, &mut |_| {})?.events_written, 0); // idempotent
    /// let mut out = Vec::new();
    /// store.export(&ExportRequest { conversation: "chat".into(), salvage: false }, &mut out)?;
    /// let lines = String::from_utf8(out).unwrap();
    /// assert!(lines.lines().nth(1).unwrap().starts_with(r#"{"seq":2,"ts":"2023-05-08T13:56:00.000Z","kind":"user""#));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the first bad record, or for an input over
    /// [`crate::ops::MAX_IMPORT_BYTES`]; [`Error::InvalidRequest`] without a needed name; [`Error::InvalidName`]; [`Error::BadInput`] for an export with erased
    /// ranges into a conversation that holds other events (nothing written); the ledger's
    /// refusals when committing (outside datasets: an explicit time earlier than the
    /// conversation's last event, nothing of that conversation written); I/O.
    pub fn import(
        &self,
        request: &crate::ops::ImportRequest,
        data: &[u8],
        progress: &mut dyn FnMut(crate::ops::ImportProgress),
    ) -> Result<crate::ops::ImportResponse> {
        let cap = crate::ops::MAX_IMPORT_BYTES;
        crate::ops::check_input_size(data.len() as u64, cap, "the import's input")?;
        let parsed = parse(request.format, request.conversation.as_deref(), data)?;
        let per_sample = request.format == ImportFormat::ConversationDataset;
        let plans = plan(parsed, data, per_sample)?;
        let total: u64 = plans.iter().map(|p| p.events).sum();
        for plan in &plans {
            self.check_import_target(plan)?;
        }
        let mut response = crate::ops::ImportResponse::default();
        let mut done = 0;
        for plan in plans {
            let name = plan.name.to_string();
            if let Some(error) = plan.refused {
                response.failed.push(crate::ops::ImportFailure {
                    conversation: name,
                    error,
                });
                continue;
            }
            let mut entry = crate::ops::ImportedConversation {
                conversation: name.clone(),
                events: plan.events,
                commits_written: 0,
                commits_replayed: 0,
                first_seq: 0,
                last_seq: 0,
            };
            let mut failed = None;
            for step in plan.steps {
                let n = step.len() as u64;
                let receipt = match self.import_step(&name, step) {
                    Ok(receipt) => receipt,
                    // A sample whose first write is refused (its times start before the
                    // conversation's last event) has nothing written: the others go on.
                    Err(e)
                        if per_sample
                            && entry.first_seq == 0
                            && e.class() == ErrorClass::BadInput =>
                    {
                        failed = Some(e.to_string());
                        break;
                    }
                    Err(e) => return Err(e),
                };
                if receipt.replayed {
                    entry.commits_replayed += 1;
                } else {
                    entry.commits_written += 1;
                    response.events_written += n;
                }
                if entry.first_seq == 0 {
                    entry.first_seq = receipt.first_seq;
                }
                entry.last_seq = receipt.last_seq;
                done += n;
                progress(crate::ops::ImportProgress { done, total });
            }
            if let Some(error) = failed {
                response.failed.push(crate::ops::ImportFailure {
                    conversation: name,
                    error,
                });
                continue;
            }
            response.notes.extend(
                plan.notes
                    .into_iter()
                    .map(|n| format!("{}: {n}", plan.name)),
            );
            response.conversations.push(entry);
        }
        Ok(response)
    }
}
