//! The two operations of a relayed model call ([`crate::call`] has the rules): the client's
//! new messages committed and the upstream body projected, then the provider's reply
//! committed.

use ctxlog_ledger::{CommitReceipt, EventBody, NewCommit};
use ctxlog_projection::{Policy, WireFormat};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Store;
use crate::call::{self, CallRequest, ClientCall, PreparedCall, ReplyRequest};
use crate::ops::{CommitRequest, LogRequest, ProjectRequest};
use crate::{Error, Result};

impl Store {
    /// Prepares a relayed call: recognises the client's messages the conversation already
    /// holds, commits the new ones (tool results before the projection; a trailing user
    /// message once the body is projected, so a call refused for its size stores no input),
    /// and projects the conversation into the body to send upstream, within the window
    /// ([`call::budget`]), with the client's other fields passed through. A call that sends
    /// nothing new while the conversation awaits a reply (a retry after a failed upstream
    /// call) projects the stored input again and commits nothing.
    ///
    /// Each commit's id derives from the seq it follows and its events, so a client's
    /// identical request sent twice at once commits once.
    ///
    /// # Errors
    /// [`Error::BadInput`] for a body that is not a request of the format, or whose new
    /// messages do not end in a user message or tool results (nothing to answer);
    /// [`Error::Diverged`] for messages that do not continue the stored ones; projection
    /// errors (class over budget when the mandatory part does not fit); ledger errors.
    pub fn prepare_call(&self, request: &CallRequest) -> Result<PreparedCall> {
        let client = call::read_call(request.format, &request.body)?;
        let stored = match self.log(&LogRequest::page(request.conversation.clone(), None, None)?) {
            Ok(log) => (log.last_seq, call::comparable(log.events)),
            Err(Error::NotFound { .. }) => (0, Vec::new()),
            Err(e) => return Err(e),
        };
        let redacted: Vec<EventBody> = self
            .redactor()
            .redact_commit(&NewCommit::new(client.events.clone()))
            .into_owned()
            .events
            .into_iter()
            .map(call::parts_as_stored)
            .collect();
        let known = call::recognised(&stored.1, &redacted)?;
        let new = &client.events[known..];
        let (before, input) = match new.last() {
            Some(EventBody::User { text, parts }) if parts.is_empty() => {
                (&new[..new.len() - 1], Some(text.clone()))
            }
            // A message with media is committed first and projected as the stored input.
            Some(EventBody::User { .. } | EventBody::ToolResult { .. }) => (new, None),
            // A retry of a call whose input is stored and not answered yet.
            None if matches!(
                stored.1.last(),
                Some(EventBody::User { .. } | EventBody::ToolResult { .. })
            ) =>
            {
                (new, None)
            }
            _ => {
                return Err(Error::BadInput {
                    reason: "the messages sent end with nothing new for the model to answer: \
                             the last message must be a new user message or the results of \
                             the model's tool calls"
                        .into(),
                });
            }
        };
        let mut last_seq = stored.0;
        if !before.is_empty() {
            last_seq = self.commit_events(&request.conversation, last_seq, before)?;
        }
        let budget = call::budget(
            request.format,
            &client.model,
            request.window,
            client.reserve,
        )?;
        let trailing = &new[before.len()..];
        let projection = self.project(&project_request(request, &client, input, budget))?;
        if !trailing.is_empty() {
            last_seq = self.commit_events(&request.conversation, last_seq, trailing)?;
        }
        Ok(PreparedCall {
            body: projection.body,
            stream: client.stream,
            recognised: known as u64,
            committed: new.len() as u64,
            last_seq,
            budget,
            tokens: projection.report.tokens,
        })
    }

    /// Commits a provider's reply to a relayed call, read by the import parser of its format
    /// (so that the same message resent by the client is recognised).
    ///
    /// # Errors
    /// [`Error::BadInput`] for a message the parser refuses or that holds nothing; ledger
    /// errors.
    pub fn commit_reply(&self, request: &ReplyRequest) -> Result<CommitReceipt> {
        let events = crate::transfer::message_events(
            request.format,
            Value::Array(vec![request.message.clone()]),
        )?;
        if events.is_empty() {
            return Err(Error::BadInput {
                reason: "the reply holds no text and no tool call".into(),
            });
        }
        self.commit(&CommitRequest {
            conversation: request.conversation.clone(),
            commit: NewCommit::new(events),
        })
    }

    /// Commits `events` after seq `after`, under an id derived from both; the new last seq.
    fn commit_events(&self, conversation: &str, after: u64, events: &[EventBody]) -> Result<u64> {
        let mut digest = Sha256::new();
        digest.update(after.to_le_bytes());
        for event in events {
            digest.update(serde_json::to_vec(event).unwrap_or_default());
            digest.update([0]);
        }
        let id: String = digest
            .finalize()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect();
        let receipt = self.commit(&CommitRequest {
            conversation: conversation.to_owned(),
            commit: NewCommit::new(events.to_vec()).with_id(format!("call-{id}")),
        })?;
        Ok(receipt.last_seq)
    }
}

/// The projection of a relayed call: whole turns, no recall pages or notices (nothing the
/// client did not send), the client's system prompt, tools and fields.
fn project_request(
    request: &CallRequest,
    client: &ClientCall,
    input: Option<String>,
    budget: Option<u64>,
) -> ProjectRequest {
    let anthropic = request.format == WireFormat::AnthropicMessages;
    ProjectRequest {
        conversation: request.conversation.clone(),
        input,
        system: client.system.clone(),
        model: Some(client.model.clone()),
        format: request.format,
        max_tokens: budget,
        reserve_output: client.reserve.filter(|_| anthropic),
        policy: Policy::Turns,
        stored_input: true,
        recall: Some(0),
        tools: client.tools.clone(),
        fields: client.fields.clone(),
        ..ProjectRequest::default()
    }
}
