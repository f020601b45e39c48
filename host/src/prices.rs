//! The price table by model (issue 33): what a turn cost when the agent's CLI does not say
//! (Codex, ACP CLIs). Costs made from it are marked `cost_estimated`.
//!
//! Built-in: list prices in US dollars per million tokens as the providers published them in
//! 2025 ([`BUILT_IN`]). The operator overrides or adds models in `config.json`:
//! `"prices": {"my-model": {"input": 1.0, "output": 4.0, "cached_input": 0.1}}`. A model is
//! priced by the longest entry its name starts with (`claude-sonnet-4-5-20250929` by
//! `claude-sonnet-4`); a model with no entry has no estimate (its cost is counted unknown).

use std::collections::BTreeMap;

use serde::Deserialize;

/// Dollars per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// Built-in list prices, US dollars per million tokens: (model prefix, input, output, cached
/// input). Anthropic's cache writes cost 1.25x input; OpenAI's are not billed apart.
pub const BUILT_IN: &[(&str, f64, f64, f64)] = &[
    ("claude-opus-4", 15.0, 75.0, 1.5),
    ("claude-sonnet-4", 3.0, 15.0, 0.3),
    ("claude-haiku-4", 1.0, 5.0, 0.1),
    ("claude-3-5-haiku", 0.8, 4.0, 0.08),
    ("gpt-5-mini", 0.25, 2.0, 0.025),
    ("gpt-5-nano", 0.05, 0.4, 0.005),
    ("gpt-5", 1.25, 10.0, 0.125),
    ("gpt-4.1-mini", 0.4, 1.6, 0.1),
    ("gpt-4.1", 2.0, 8.0, 0.5),
    ("o4-mini", 1.1, 4.4, 0.275),
    ("o3", 2.0, 8.0, 0.5),
];

/// Token counts to price, split as providers bill them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Billed {
    /// Input tokens neither read from nor written to the cache.
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
}

/// Prices by model prefix: the built-in ones with the operator's on top.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::with(&BTreeMap::new())
    }
}

impl PriceTable {
    /// The built-in table with `overrides` (model prefix -> price) replacing or adding entries.
    pub fn with(overrides: &BTreeMap<String, Price>) -> PriceTable {
        let mut prices: BTreeMap<String, Price> = BUILT_IN
            .iter()
            .map(|&(model, input, output, cached)| {
                let write = if model.starts_with("claude") { Some(input * 1.25) } else { None };
                (model.to_owned(), Price { input, output, cached_input: Some(cached), cache_write: write })
            })
            .collect();
        prices.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        PriceTable { prices }
    }

    /// The price of `model`: its own entry, else the longest entry it starts with.
    pub fn price(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.prices.get(model) {
            return Some(*p);
        }
        self.prices.iter().filter(|(prefix, _)| model.starts_with(prefix.as_str())).max_by_key(|(prefix, _)| prefix.len()).map(|(_, p)| *p)
    }

    /// What `tokens` cost at `model`'s price, US dollars; `None` without a price.
    pub fn cost(&self, model: &str, tokens: Billed) -> Option<f64> {
        let p = self.price(model)?;
        let per = |n: u64, rate: f64| n as f64 * rate / 1_000_000.0;
        Some(
            per(tokens.input, p.input)
                + per(tokens.cached_input, p.cached_input.unwrap_or(p.input))
                + per(tokens.cache_write, p.cache_write.unwrap_or(p.input))
                + per(tokens.output, p.output),
        )
    }

    /// The first bad entry of an operator's table, for `config.json`: negative or non-finite.
    pub fn check(overrides: &BTreeMap<String, Price>) -> Result<(), String> {
        for (model, p) in overrides {
            let rates = [Some(p.input), Some(p.output), p.cached_input, p.cache_write];
            if rates.iter().flatten().any(|r| !r.is_finite() || *r < 0.0) {
                return Err(format!("prices.{model}: every rate must be a number of dollars per million tokens, at least 0"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_model_is_priced_by_its_longest_prefix() {
        let t = PriceTable::default();
        assert_eq!(t.price("gpt-5-mini-2025-08-07").unwrap().input, 0.25);
        assert_eq!(t.price("gpt-5-codex").unwrap().input, 1.25);
        assert_eq!(t.price("claude-sonnet-4-5-20250929").unwrap().output, 15.0);
        assert!(t.price("scripted-model").is_none());
    }

    #[test]
    fn the_operator_overrides_and_adds() {
        let mut o = BTreeMap::new();
        o.insert("scripted".to_owned(), Price { input: 1000.0, output: 2000.0, cached_input: None, cache_write: None });
        let t = PriceTable::with(&o);
        let cost = t.cost("scripted-model", Billed { input: 1000, cached_input: 500, cache_write: 0, output: 10 }).unwrap();
        assert!((cost - (1.0 + 0.5 + 0.02)).abs() < 1e-9, "{cost}");
        assert!(PriceTable::check(&o).is_ok());
        o.get_mut("scripted").unwrap().output = -1.0;
        assert!(PriceTable::check(&o).unwrap_err().contains("prices.scripted"));
    }
}
