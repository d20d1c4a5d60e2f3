//! A seeded generator of user ↔ assistant project chats, the kind of conversation ctxlog
//! mostly carries: three sessions on different days, the user asking about the project's
//! topics and the assistant answering at length (several pages per reply, echoing the
//! question's words); facts stated once by the user in the first person, some restated, some
//! updated later; instructions given once; questions asked in the second person.

use ctxlog_ledger::event::{Event, EventBody};

use super::generator::Rng;
use super::protocol::{EvalQuestion, EvalSet};

/// The fixed seed: the same chats every run.
pub const SEED: u64 = 0x9e0_c4a7_2026;
/// Chats generated.
pub const CHATS: usize = 40;

/// A topic: the words its talk is made of.
const TOPICS: [&[&str]; 8] = [
    &[
        "sprint",
        "planning",
        "tasks",
        "deadline",
        "milestone",
        "backlog",
        "estimate",
    ],
    &[
        "database",
        "schema",
        "migration",
        "query",
        "index",
        "table",
        "transactions",
    ],
    &[
        "api",
        "endpoint",
        "response",
        "latency",
        "request",
        "dashboard",
        "cache",
    ],
    &[
        "pull", "request", "review", "branch", "merge", "code", "team",
    ],
    &[
        "deploy",
        "server",
        "container",
        "pipeline",
        "release",
        "hosting",
        "app",
    ],
    &[
        "test",
        "coverage",
        "unit",
        "integration",
        "fixture",
        "mock",
        "release",
    ],
    &[
        "login", "session", "token", "password", "auth", "expiry", "user",
    ],
    &[
        "budget", "cost", "month", "cloud", "plan", "pricing", "hosting",
    ],
];

/// A fact about topic `topic`: the statement, its update, the second-person question, values.
struct Fact {
    topic: usize,
    fact: &'static str,
    update: &'static str,
    question: &'static str,
    values: [&'static str; 4],
}

#[rustfmt::skip]
const FACTS: [Fact; 8] = [
    Fact { topic: 0, fact: "My first sprint ends on {v}, and it covers registration and login.", update: "Change of plan: my first sprint now ends on {w} instead.", question: "When does my first sprint end?", values: ["March 29", "April 5", "April 12", "May 3"] },
    Fact { topic: 1, fact: "I'm using {v} as the database for this project.", update: "I switched the project database from {v} to {w} last week.", question: "Which database does my project use?", values: ["PostgreSQL", "MySQL", "SQLite", "MongoDB"] },
    Fact { topic: 2, fact: "The dashboard API currently responds in about {v} ms on average.", update: "After adding caching, the dashboard API now averages {w} ms.", question: "What is the average response time of my dashboard API?", values: ["250", "320", "480", "600"] },
    Fact { topic: 3, fact: "{v} reviews every pull request on my team before it is merged.", update: "{w} has taken over pull request reviews from {v}.", question: "Who reviews my pull requests?", values: ["Dana", "Omar", "Lena", "Priya"] },
    Fact { topic: 4, fact: "I deploy the app to {v}.", update: "I moved the deployment from {v} to {w}.", question: "Where do I deploy my app?", values: ["Heroku", "Fly", "DigitalOcean", "Render"] },
    Fact { topic: 5, fact: "I want at least {v} percent test coverage before the release.", update: "I lowered the coverage target to {w} percent for this release.", question: "What test coverage target did I set?", values: ["70", "80", "85", "90"] },
    Fact { topic: 6, fact: "Login sessions in my app expire after {v} minutes of inactivity.", update: "I changed the session expiry to {w} minutes.", question: "After how many minutes do my login sessions expire?", values: ["15", "30", "45", "60"] },
    Fact { topic: 7, fact: "My hosting budget is {v} dollars a month.", update: "My hosting budget went up to {w} dollars a month.", question: "How much can I spend on hosting each month?", values: ["20", "50", "75", "120"] },
];

/// Instructions given once, and a later request they apply to.
const INSTRUCTIONS: [(&str, &str); 4] = [
    (
        "Always format code snippets with syntax highlighting when I ask about implementation details.",
        "Could you show me how to implement the login feature?",
    ),
    (
        "Please always include type hints in the Python code you give me.",
        "Can you write the function that exports my transactions to CSV?",
    ),
    (
        "Keep your answers short: bullet points, no more than five items.",
        "What should I check before the release?",
    ),
    (
        "Always mention the time complexity when you suggest an algorithm.",
        "How should I sort the expense list by date?",
    ),
];

/// What the user asks about a topic (no fact in it).
const ASKS: [&str; 4] = [
    "Can you help me with the {a} and the {b}?",
    "How should I handle the {a} for the {b}?",
    "What is the best way to organise the {a} around the {b}?",
    "I'm stuck on the {a}; any advice on the {b}?",
];

/// Sentences of the assistant's replies.
const SENTENCES: [&str; 6] = [
    "When you work on the {a}, keep the {b} and the {c} consistent.",
    "A good first step for the {a} is to write down how the {b} should behave.",
    "Many projects treat the {a} as part of the {b}, which keeps the {c} simple.",
    "If the {a} changes, review the {b} and check that the {c} still holds.",
    "You can automate the {a} so that the {b} never drifts from the {c}.",
    "Document the {a} next to the {b}; future you will thank you when the {c} grows.",
];

fn word(rng: &mut Rng, topic: usize) -> &'static str {
    let t = if rng.chance(70) {
        topic
    } else {
        rng.below(TOPICS.len())
    };
    TOPICS[t][rng.below(TOPICS[t].len())]
}

fn fill(rng: &mut Rng, template: &str, topic: usize) -> String {
    let mut s = template.to_owned();
    for slot in ["{a}", "{b}", "{c}"] {
        s = s.replacen(slot, word(rng, topic), 1);
    }
    s
}

/// A long reply about `topic` that opens by echoing the user's message: 3,000–7,000 chars.
fn reply(rng: &mut Rng, topic: usize, echo: &str) -> String {
    let mut out = format!("Thanks, noted: \"{echo}\" Here is how I would approach it.\n\n");
    let target = 3000 + rng.below(4000);
    while out.len() < target {
        for _ in 0..6 {
            let sentence = SENTENCES[rng.below(SENTENCES.len())];
            out.push_str(&fill(rng, sentence, topic));
            out.push(' ');
        }
        out.push_str("\n\n");
    }
    out
}

/// A chat under construction: events and the sessions' base times.
struct Chat {
    events: Vec<Event>,
    base: i64,
}

impl Chat {
    /// Appends a user message and the assistant's reply; returns the user message's seq.
    fn exchange(&mut self, rng: &mut Rng, user: String, topic: usize) -> u64 {
        let seq = self.events.len() as u64 + 1;
        let answer = reply(rng, topic, &user);
        for body in [
            EventBody::User {
                text: user,
                parts: Vec::new(),
                provider_item: None,
            },
            EventBody::Assistant {
                text: answer,
                provider_item: None,
            },
        ] {
            let n = self.events.len() as i64;
            self.events.push(Event {
                seq: n as u64 + 1,
                ts_ms: self.base + n * 60_000,
                body,
            });
        }
        seq
    }

    fn chatter(&mut self, rng: &mut Rng, n: usize) {
        for _ in 0..n {
            let topic = rng.below(TOPICS.len());
            let template = ASKS[rng.below(ASKS.len())];
            let ask = fill(rng, template, topic);
            self.exchange(rng, ask, topic);
        }
    }
}

const CATEGORIES: [&str; 5] = [
    "stated fact",
    "updated fact",
    "restated fact",
    "instruction",
    "two facts",
];

/// The generated set.
pub fn set() -> EvalSet {
    let mut rng = Rng(SEED);
    let mut set = EvalSet {
        name: format!("project chats (generator, seed {SEED:#x})"),
        categories: CATEGORIES.iter().map(|c| (*c).to_owned()).collect(),
        convs: Vec::new(),
        questions: Vec::new(),
    };
    for c in 0..CHATS {
        let (events, questions) = chat(&mut rng, c);
        set.convs.push(events);
        set.questions.extend(questions);
    }
    set
}

/// What a chat said: each fact's index, the seqs that state its current value, whether it
/// was updated, and each instruction's index with its seq.
struct Said {
    facts: Vec<(usize, Vec<u64>, bool)>,
    instructions: Vec<(usize, u64)>,
}

/// One chat: three sessions a week apart; facts and an instruction in the first,
/// restatements, updates and a second instruction in the later ones, chatter between.
fn chat(rng: &mut Rng, conv: usize) -> (Vec<Event>, Vec<EvalQuestion>) {
    let base = 1_710_000_000_000 + conv as i64 * 86_400_000;
    let mut chat = Chat {
        events: Vec::new(),
        base,
    };
    let mut said = Said {
        facts: Vec::new(),
        instructions: Vec::new(),
    };
    let mut values = Vec::new();
    while said.facts.len() < 5 {
        let f = rng.below(FACTS.len());
        if said.facts.iter().any(|x| x.0 == f) {
            continue;
        }
        let n = 1 + rng.below(4);
        chat.chatter(rng, n);
        let v = FACTS[f].values[rng.below(4)];
        let seq = chat.exchange(rng, FACTS[f].fact.replace("{v}", v), FACTS[f].topic);
        said.facts.push((f, vec![seq], false));
        values.push(v);
    }
    for session in 1..3 {
        let i = rng.below(INSTRUCTIONS.len());
        if !said.instructions.iter().any(|x| x.0 == i) {
            let seq = chat.exchange(rng, INSTRUCTIONS[i].0.to_owned(), 3);
            said.instructions.push((i, seq));
        }
        chat.base = base + session * 7 * 86_400_000 - chat.events.len() as i64 * 60_000;
        let n = 6 + rng.below(6);
        chat.chatter(rng, n);
        for ((f, seqs, updated), v) in said.facts.iter_mut().zip(&values) {
            if *updated || !rng.chance(25) {
                continue;
            }
            let fact = &FACTS[*f];
            if rng.chance(50) {
                let w = fact.values.iter().find(|x| *x != v).copied().unwrap_or(v);
                let text = fact.update.replace("{v}", v).replace("{w}", w);
                *seqs = vec![chat.exchange(rng, text, fact.topic)];
                *updated = true;
            } else {
                let text = format!("As I said before, {}", fact.fact.replace("{v}", v));
                seqs.push(chat.exchange(rng, text, fact.topic));
            }
            let n = 1 + rng.below(3);
            chat.chatter(rng, n);
        }
    }
    chat.chatter(rng, 2);
    (chat.events, questions(conv, &said))
}

/// The questions of one chat: one per fact (by whether it was updated or restated), one per
/// instruction, and one asking for two facts at once.
fn questions(conv: usize, said: &Said) -> Vec<EvalQuestion> {
    let mut out: Vec<EvalQuestion> = said
        .facts
        .iter()
        .map(|(f, seqs, updated)| EvalQuestion {
            conv,
            text: FACTS[*f].question.to_owned(),
            evidence: seqs.clone(),
            category: if *updated {
                1
            } else if seqs.len() > 1 {
                2
            } else {
                0
            },
        })
        .collect();
    out.extend(said.instructions.iter().map(|(i, seq)| EvalQuestion {
        conv,
        text: INSTRUCTIONS[*i].1.to_owned(),
        evidence: vec![*seq],
        category: 3,
    }));
    let (a, b) = (&said.facts[0], &said.facts[1]);
    let second = FACTS[b.0].question;
    let lowered = second[..1].to_lowercase() + &second[1..];
    out.push(EvalQuestion {
        conv,
        text: format!("{} And {lowered}", FACTS[a.0].question),
        evidence: vec![a.1[0], b.1[0]],
        category: 4,
    });
    out
}
