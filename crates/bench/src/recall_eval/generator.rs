//! A seeded generator of recall scenarios: facts placed at random among distractor tool
//! records, look-alike facts about other services, paraphrased questions, facts updated later,
//! questions needing two records, and unanswerable questions.

use ctxlog_ledger::event::{Event, EventBody, ToolStatus};
use ctxlog_recall::{NoArtifacts, RecallIndex, SearchOptions};

use super::Scratch;
use super::metrics::table;
use super::protocol::{EvalQuestion, EvalSet};
use super::study::distractor;

/// The fixed seed: the same scenarios every run.
pub const SEED: u64 = 0x5eed_c71d_2026;
/// Scenarios generated.
pub const SCENARIOS: usize = 60;

/// A fact template. `{s}` is a service, `{v}` a value, `{w}` the updated value.
struct Template {
    fact: &'static str,
    update: &'static str,
    question: &'static str,
    paraphrase: &'static str,
    values: &'static [&'static str],
}

const TEMPLATES: &[Template] = &[
    Template {
        fact: "The {s} service database listens on port {v}.",
        update: "The {s} database port was changed to {w}; use it instead of {v}.",
        question: "Which port does the {s} database use?",
        paraphrase: "What socket number should I connect to for the {s} DB?",
        values: &["5432", "5433", "6432", "7000", "15432", "25060"],
    },
    Template {
        fact: "Deploys of {s} require approval from {v}.",
        update: "{s} deploys now need approval from {w} instead of {v}.",
        question: "Who approves {s} deploys?",
        paraphrase: "Whose sign-off does a {s} release need?",
        values: &[
            "Dana Whitfield",
            "Omar Haddad",
            "Lena Fischer",
            "Priya Raman",
            "Tomás Ortega",
        ],
    },
    Template {
        fact: "The {s} nightly job runs at {v}:00 UTC.",
        update: "The {s} nightly job was moved to {w}:00 UTC.",
        question: "When does the {s} nightly job run?",
        paraphrase: "At what hour is the {s} batch scheduled?",
        values: &["01", "02", "03", "04", "05", "23"],
    },
    Template {
        fact: "Logs of {s} are retained for {v} days.",
        update: "Retention of {s} logs updated to {w} days.",
        question: "How long are {s} logs retained?",
        paraphrase: "For how many days do we keep the {s} records?",
        values: &["30", "90", "180", "400", "730"],
    },
    Template {
        fact: "Never restart {s} during business hours; restarts happen after {v}:00.",
        update: "Restarting {s} is now allowed after {w}:00 instead.",
        question: "When may {s} be restarted?",
        paraphrase: "Is it OK to bounce {s} in the afternoon?",
        values: &["18", "19", "20", "21", "22"],
    },
    Template {
        fact: "The {s} API rate limit is {v} requests per minute.",
        update: "The {s} API rate limit now is {w} requests per minute.",
        question: "What is the rate limit of the {s} API?",
        paraphrase: "How many calls per minute may a client make to {s}?",
        values: &["60", "120", "600", "1000", "3000"],
    },
    Template {
        fact: "The {s} team chats in channel #{s}-{v}.",
        update: "The {s} team channel was renamed to #{s}-{w}.",
        question: "Which chat channel does the {s} team use?",
        paraphrase: "Where can I message the {s} people?",
        values: &["dev", "eng", "ops", "core", "crew"],
    },
    Template {
        fact: "Feature flags for {s} are stored in {v}.",
        update: "Feature flags for {s} moved to {w}.",
        question: "Where are the {s} feature flags stored?",
        paraphrase: "Which file holds the toggles of {s}?",
        values: &[
            "flags.toml",
            "flags.yaml",
            "config/features.json",
            "launchdarkly",
            "settings.ini",
        ],
    },
];

const SERVICES: &[&str] = &[
    "billing",
    "search",
    "auth",
    "ledger",
    "reports",
    "gateway",
    "media",
    "notifier",
    "checkout",
    "inventory",
];

/// xorshift64*: small, seeded, good enough to place records.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn fill(t: &str, s: &str, v: &str, w: &str) -> String {
    t.replace("{s}", s).replace("{v}", v).replace("{w}", w)
}

/// One question of a scenario: text, relevant record ids, and its kind.
struct Question {
    text: String,
    relevant: Vec<usize>,
    kind: Kind,
    /// For updated facts: (newer, older) record ids.
    update: Option<(usize, usize)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Direct,
    Paraphrase,
    Updated,
    Multi,
    Unanswerable,
}

/// A scenario: record texts in order (ids are positions), and questions.
struct Scenario {
    records: Vec<String>,
    questions: Vec<Question>,
}

fn scenario(rng: &mut Rng) -> Scenario {
    let distractors = 300 + rng.below(2700);
    let facts = 6 + rng.below(7);
    let mut records: Vec<String> = (0..distractors)
        .map(|i| distractor(i + rng.below(100_000)))
        .collect();
    let mut used = Vec::new();
    let mut questions = Vec::new();
    let mut positions = Vec::new();
    while used.len() < facts {
        let (t, s) = (rng.below(TEMPLATES.len()), rng.below(SERVICES.len()));
        if used.contains(&(t, s)) {
            continue;
        }
        used.push((t, s));
    }
    // Insert facts at random places (later inserts shift earlier ids, so place first, then ask).
    let mut placed: Vec<(usize, usize, String, Option<String>)> = Vec::new();
    for &(t, s) in &used {
        let tpl = &TEMPLATES[t];
        let v = tpl.values[rng.below(tpl.values.len())];
        let mut w = tpl.values[rng.below(tpl.values.len())];
        if w == v {
            w = tpl.values
                [(tpl.values.iter().position(|x| *x == v).unwrap_or(0) + 1) % tpl.values.len()];
        }
        let fact = fill(tpl.fact, SERVICES[s], v, w);
        let update = rng.chance(30).then(|| fill(tpl.update, SERVICES[s], v, w));
        placed.push((t, s, fact, update));
    }
    for (t, s, fact, update) in placed {
        let at = rng.below(records.len() / 2 + 1);
        records.insert(at, fact);
        shift(&mut positions, at);
        let fact_pos = at;
        let upd_pos = update.map(|u| {
            let at2 = fact_pos + 1 + rng.below(records.len() - fact_pos);
            records.insert(at2, u);
            shift(&mut positions, at2);
            at2
        });
        positions.push((t, s, fact_pos, upd_pos));
    }
    for &(t, s, fact_pos, upd_pos) in &positions {
        let tpl = &TEMPLATES[t];
        let para = rng.chance(40);
        let text = fill(
            if para { tpl.paraphrase } else { tpl.question },
            SERVICES[s],
            "",
            "",
        );
        match upd_pos {
            Some(u) => questions.push(Question {
                text,
                relevant: vec![u],
                kind: Kind::Updated,
                update: Some((u, fact_pos)),
            }),
            None => questions.push(Question {
                text,
                relevant: vec![fact_pos],
                kind: if para { Kind::Paraphrase } else { Kind::Direct },
                update: None,
            }),
        }
    }
    // Two questions needing two records each.
    for _ in 0..2 {
        let a = positions[rng.below(positions.len())];
        let b = positions[rng.below(positions.len())];
        if a.1 == b.1 && a.0 == b.0 {
            continue;
        }
        let qa = fill(TEMPLATES[a.0].question, SERVICES[a.1], "", "");
        let qb = fill(TEMPLATES[b.0].question, SERVICES[b.1], "", "");
        questions.push(Question {
            text: format!("{} And {}", qa, lowercase_first(&qb)),
            relevant: vec![a.3.unwrap_or(a.2), b.3.unwrap_or(b.2)],
            kind: Kind::Multi,
            update: None,
        });
    }
    // Two unanswerable questions: a template about a service with no such fact.
    let mut asked = 0;
    while asked < 2 {
        let (t, s) = (rng.below(TEMPLATES.len()), rng.below(SERVICES.len()));
        if used.contains(&(t, s)) {
            continue;
        }
        questions.push(Question {
            text: fill(TEMPLATES[t].question, SERVICES[s], "", ""),
            relevant: Vec::new(),
            kind: Kind::Unanswerable,
            update: None,
        });
        asked += 1;
    }
    Scenario { records, questions }
}

fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_lowercase().chain(c).collect())
}

/// Moves recorded positions at or after `at` one place later.
fn shift(positions: &mut [(usize, usize, usize, Option<usize>)], at: usize) {
    for p in positions.iter_mut() {
        if p.2 >= at {
            p.2 += 1;
        }
        if let Some(u) = p.3.as_mut().filter(|u| **u >= at) {
            *u += 1;
        }
    }
}

/// A scenario's records as tool results, 20 s apart.
fn events(sc: &Scenario) -> Vec<Event> {
    sc.records
        .iter()
        .enumerate()
        .map(|(j, text)| Event {
            seq: j as u64 + 1,
            ts_ms: 1_700_000_000_000 + j as i64 * 20_000,
            body: EventBody::ToolResult {
                call_id: format!("c{j}"),
                tool: "shell".into(),
                status: ToolStatus::Ok,
                exit_code: Some(0),
                text: text.clone(),
                artifact: None,
                parts: Vec::new(),
                provider_item: None,
            },
        })
        .collect()
}

/// The first `scenarios` scenarios as a protocol set (unanswerable questions left out: they
/// have no evidence).
pub fn eval_set(scenarios: usize) -> EvalSet {
    let mut rng = Rng(SEED);
    let kinds = [Kind::Direct, Kind::Paraphrase, Kind::Updated, Kind::Multi];
    let mut set = EvalSet {
        name: format!("tool records (generator, seed {SEED:#x}, {scenarios} scenarios)"),
        categories: ["direct", "paraphrased", "updated fact", "two records"]
            .map(String::from)
            .to_vec(),
        convs: Vec::new(),
        questions: Vec::new(),
    };
    for _ in 0..scenarios {
        let sc = scenario(&mut rng);
        for q in &sc.questions {
            let Some(category) = kinds.iter().position(|k| *k == q.kind) else {
                continue;
            };
            set.questions.push(EvalQuestion {
                conv: set.convs.len(),
                text: q.text.clone(),
                evidence: q.relevant.iter().map(|id| *id as u64 + 1).collect(),
                category,
            });
        }
        set.convs.push(events(&sc));
    }
    set
}

#[derive(Default)]
struct Tally {
    n: usize,
    at4: usize,
    at16: usize,
}

/// Runs the generator and returns its Markdown section.
pub fn run(scratch: &Scratch) -> anyhow::Result<String> {
    let mut rng = Rng(SEED);
    let kinds = [Kind::Direct, Kind::Paraphrase, Kind::Updated, Kind::Multi];
    let mut tallies: Vec<Tally> = kinds.iter().map(|_| Tally::default()).collect();
    let (mut upd_n, mut upd_above) = (0, 0);
    let (mut unans_n, mut unans_lookalike) = (0, 0);
    let mut records_total = 0;
    for i in 0..SCENARIOS {
        let sc = scenario(&mut rng);
        records_total += sc.records.len();
        let events = events(&sc);
        let mut index = RecallIndex::open(scratch.path(), &format!("gen-{i}"))?;
        index.update(&events, &NoArtifacts)?;
        for q in &sc.questions {
            let r = index.search(
                &q.text,
                &SearchOptions {
                    limit: 16,
                    ..SearchOptions::default()
                },
            )?;
            let ids: Vec<usize> = r.hits.iter().map(|h| h.seq as usize - 1).collect();
            let rank = |id: usize| ids.iter().position(|x| *x == id);
            if q.kind == Kind::Unanswerable {
                unans_n += 1;
                unans_lookalike +=
                    usize::from(ids.iter().take(4).any(|id| is_fact(&sc.records[*id])));
                continue;
            }
            let k = kinds.iter().position(|x| *x == q.kind).unwrap_or(0);
            let t = &mut tallies[k];
            t.n += 1;
            t.at4 += usize::from(q.relevant.iter().all(|id| rank(*id).is_some_and(|r| r < 4)));
            t.at16 += usize::from(q.relevant.iter().all(|id| rank(*id).is_some()));
            if let Some((newer, older)) = q.update {
                upd_n += 1;
                let (rn, ro) = (rank(newer), rank(older));
                upd_above += usize::from(match (rn, ro) {
                    (Some(a), Some(b)) => a < b,
                    (Some(_), None) => true,
                    _ => false,
                });
            }
        }
    }
    let names = [
        "direct",
        "paraphrased",
        "updated fact (current value asked)",
        "two records needed",
    ];
    let rows: Vec<Vec<String>> = names
        .iter()
        .zip(&tallies)
        .map(|(n, t)| {
            vec![
                n.to_string(),
                t.n.to_string(),
                pct(t.at4, t.n),
                pct(t.at16, t.n),
            ]
        })
        .collect();
    let mut out = format!(
        "\n### Randomized generator (seed {SEED:#x})\n\n{SCENARIOS} scenarios, {records_total} records in all: 6–12 facts from {} templates × {} services placed at random among 300–3,000 distractor tool records; look-alike facts about other services; 40 % of questions paraphrased; 30 % of facts updated later (the update must be found); two questions per scenario need two records; two are unanswerable.\n\n",
        TEMPLATES.len(),
        SERVICES.len()
    );
    out.push_str(&table(
        &[
            "question kind",
            "questions",
            "all relevant in top 4",
            "all relevant in top 16",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "\nUpdated facts: the update ranks above the fact it replaces in {} of {upd_n} questions ({}).\nUnanswerable: {unans_lookalike} of {unans_n} have a look-alike fact (same template, another service) in the top 4 — the reason every result says a hit is not proof and a miss is not absence.\n",
        upd_above,
        pct(upd_above, upd_n)
    ));
    Ok(out)
}

fn is_fact(text: &str) -> bool {
    SERVICES.iter().any(|s| text.contains(s))
}

fn pct(a: usize, n: usize) -> String {
    if n == 0 {
        "—".into()
    } else {
        format!("{:.1} %", 100.0 * a as f64 / n as f64)
    }
}
