//! The variants the lever log measures: each ranking feature of the product switched off
//! alone, and each candidate lever switched on alone (docs/recall.md, "Lever log").

use ctxlog_recall::{IndexConfig, Ranking};

use super::protocol::Variant;

fn variant(name: &str, config: IndexConfig, ranking: Ranking) -> Variant {
    Variant {
        name: name.to_owned(),
        config,
        ranking,
    }
}

/// Every variant, one change from the product's defaults each.
pub fn variants() -> Vec<Variant> {
    let d = IndexConfig::default;
    let r = Ranking::default;
    vec![
        variant(
            "− context field",
            IndexConfig {
                context_before: 0,
                context_after: 0,
                ..d()
            },
            r(),
        ),
        variant(
            "− date metadata",
            IndexConfig {
                date_metadata: false,
                ..d()
            },
            r(),
        ),
        variant(
            "− stop-word removal",
            d(),
            Ranking {
                stop_words: false,
                ..r()
            },
        ),
        variant(
            "− author field",
            d(),
            Ranking {
                author_weight: 0.0,
                ..r()
            },
        ),
        variant(
            "− episode evidence",
            d(),
            Ranking {
                episode_weight: 0.0,
                ..r()
            },
        ),
        variant(
            "− supersession lift",
            d(),
            Ranking {
                supersession: false,
                ..r()
            },
        ),
        variant(
            "+ best page per event",
            d(),
            Ranking {
                best_page_per_event: true,
                ..r()
            },
        ),
        variant(
            "+ first person → the user's pages (×1.5)",
            d(),
            Ranking {
                first_person_weight: 0.5,
                ..r()
            },
        ),
        variant(
            "+ first person → the user's pages (×2)",
            d(),
            Ranking {
                first_person_weight: 1.0,
                ..r()
            },
        ),
        variant(
            "+ feedback: 5 terms from the top 3 pages (weight 0.3)",
            d(),
            Ranking {
                feedback_terms: 5,
                ..r()
            },
        ),
        variant(
            "+ multi-part questions fused (RRF)",
            d(),
            Ranking {
                multi_part: true,
                ..r()
            },
        ),
        variant(
            "context weight 0.2",
            d(),
            Ranking {
                context_weight: 0.2,
                ..r()
            },
        ),
        variant(
            "context weight 0.8",
            d(),
            Ranking {
                context_weight: 0.8,
                ..r()
            },
        ),
        variant(
            "date metadata weight 0.3",
            d(),
            Ranking {
                meta_weight: 0.3,
                ..r()
            },
        ),
        variant(
            "neighbours: 1 before, 2 after",
            IndexConfig {
                context_before: 1,
                context_after: 2,
                ..d()
            },
            r(),
        ),
        variant(
            "every feature off (plain pages, BM25 only)",
            IndexConfig::plain(),
            Ranking {
                stop_words: false,
                author_weight: 0.0,
                episode_weight: 0.0,
                supersession: false,
                ..r()
            },
        ),
    ]
}
