//! The variants the lever log measures: each ranking feature of the product switched off
//! alone, and each candidate lever switched on alone (docs/recall.md, "Lever log").

use ctxlog_recall::{ContextGate, IndexConfig, Ranking, SemanticGate};

use super::protocol::Variant;

/// The product's index configuration with `ranking` changed by `f`.
fn ranked(name: &str, f: impl FnOnce(&mut Ranking)) -> Variant {
    let mut ranking = Ranking::default();
    f(&mut ranking);
    Variant {
        name: name.to_owned(),
        config: IndexConfig::default(),
        ranking,
        semantic: false,
    }
}

/// The product's ranking over an index configured by `f`.
fn indexed(name: &str, f: impl FnOnce(&mut IndexConfig)) -> Variant {
    let mut config = IndexConfig::default();
    f(&mut config);
    Variant {
        name: name.to_owned(),
        config,
        ranking: Ranking::default(),
        semantic: false,
    }
}

/// The semantic leg's variants (with `--embeddings`): the leg fused with the product's
/// lexical ranking at several weights, and the leg alone; ungated
/// ([`SemanticGate::Every`]) unless the variant names its gate.
pub fn semantic_variants() -> Vec<Variant> {
    let leg = |name: &str, f: &dyn Fn(&mut Ranking)| {
        let mut v = ranked(name, |r| {
            r.semantic_gate = SemanticGate::Every;
            f(r);
        });
        v.semantic = true;
        v
    };
    vec![
        leg("+ semantic leg (RRF, weight 1)", &|_| {}),
        leg("+ semantic leg (RRF, weight 0.5)", &|r| {
            r.semantic_weight = 0.5
        }),
        leg("+ semantic leg (RRF, weight 2)", &|r| {
            r.semantic_weight = 2.0
        }),
        leg("semantic leg alone (no lexical ranking)", &|r| {
            r.lexical_weight = 0.0
        }),
        leg("+ semantic leg (RRF, weight 0.25)", &|r| {
            r.semantic_weight = 0.25
        }),
        leg("+ semantic leg, lexical top 5 events kept first", &|r| {
            r.semantic_keep_lexical = 5
        }),
        leg("+ semantic leg, lexical top 7 events kept first", &|r| {
            r.semantic_keep_lexical = 7
        }),
        leg("semantic leg + plain BM25 (RRF, no tuned ranking)", &|r| {
            r.lexical_weight = 0.0;
            r.plain_weight = 1.0;
        }),
        leg(
            "+ semantic leg + plain BM25 (RRF, weights 1, 0.5, 0.5)",
            &|r| {
                r.semantic_weight = 0.5;
                r.plain_weight = 0.5;
            },
        ),
        leg("+ semantic leg only when lexical coverage < 0.5", &|r| {
            r.semantic_below_coverage = Some(0.5)
        }),
        leg("+ semantic leg only when lexical coverage < 0.34", &|r| {
            r.semantic_below_coverage = Some(0.34)
        }),
        leg(
            "+ semantic leg only on events longer than one page (weight 1)",
            &|r| r.semantic_gate = SemanticGate::LongEvents,
        ),
        leg(
            "+ semantic leg only on events longer than one page (weight 2)",
            &|r| {
                r.semantic_gate = SemanticGate::LongEvents;
                r.semantic_weight = 2.0;
            },
        ),
        leg(
            "+ semantic leg weighted by the share of long events (weight 1)",
            &|r| r.semantic_gate = SemanticGate::LongShare,
        ),
        leg(
            "+ semantic leg weighted by the share of long events (weight 2)",
            &|r| {
                r.semantic_gate = SemanticGate::LongShare;
                r.semantic_weight = 2.0;
            },
        ),
    ]
}

/// Every variant, one change from the product's defaults each (the last: all of them off).
pub fn variants() -> Vec<Variant> {
    let mut every_feature_off = indexed("every feature off (plain pages, BM25 only)", |c| {
        *c = IndexConfig::plain();
    });
    every_feature_off.ranking = Ranking {
        stop_words: false,
        author_weight: 0.0,
        episode_weight: 0.0,
        supersession: false,
        best_page_per_event: false,
        first_person_weight: 0.0,
        ..Ranking::default()
    };
    vec![
        ranked("− best page per event", |r| r.best_page_per_event = false),
        ranked("− first person → the user's pages (×2)", |r| {
            r.first_person_weight = 0.0
        }),
        ranked("first person ×3", |r| r.first_person_weight = 2.0),
        ranked("first person credit only for the user's own words", |r| {
            r.first_person_context_share = 0.0
        }),
        ranked(
            "first person ×2 for every user page, own words or not (as before)",
            |r| r.first_person_own_text = false,
        ),
        ranked("+ second person → the assistant's pages (×2)", |r| {
            r.second_person = Some(1.0)
        }),
        ranked("+ second person → neither speaker credited", |r| {
            r.second_person = Some(0.0)
        }),
        ranked("+ assistant pages supersede too (as before)", |r| {
            r.supersede_by_assistant = true
        }),
        ranked("− supersession lift", |r| r.supersession = false),
        indexed("− context field (neighbouring turns)", |c| {
            c.context_before = 0;
            c.context_after = 0;
        }),
        indexed("context field only on events that fit one page", |c| {
            c.context_gate = ContextGate::ShortCarry;
        }),
        indexed("context field lent only by events that fit one page", |c| {
            c.context_gate = ContextGate::ShortLend;
        }),
        indexed("context field only between events that fit one page", |c| {
            c.context_gate = ContextGate::Short;
        }),
        ranked("context weight 0.8", |r| r.context_weight = 0.8),
        ranked("context weight 0.2", |r| r.context_weight = 0.2),
        ranked("context weight 0.6", |r| r.context_weight = 0.6),
        ranked("date weight 0.5", |r| r.meta_weight = 0.5),
        ranked("date weight 2", |r| r.meta_weight = 2.0),
        indexed("− date metadata", |c| c.date_metadata = false),
        indexed("− relative times resolved to dates", |c| {
            c.relative_dates = false
        }),
        ranked("− stop-word removal", |r| r.stop_words = false),
        ranked("− author field", |r| r.author_weight = 0.0),
        ranked("− episode evidence", |r| r.episode_weight = 0.0),
        ranked("+ episode diversity 0.15", |r| r.episode_diversity = 0.15),
        ranked("+ episode diversity 0.4", |r| r.episode_diversity = 0.4),
        ranked("+ neighbouring turns' scores (weight 0.2)", |r| {
            r.neighbour_weight = 0.2
        }),
        ranked(
            "+ feedback: 5 terms from the top 3 pages (weight 0.3)",
            |r| r.feedback_terms = 5,
        ),
        ranked("+ multi-part questions fused (RRF)", |r| {
            r.multi_part = true
        }),
        every_feature_off,
    ]
}
