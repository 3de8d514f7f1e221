//! Which model answers a request, and with whose key.
//!
//! The request's `model` is what goes upstream. A configured slot whose id it is (`models.large`,
//! `models.small`) answers with that slot's provider and window; any other id goes to the large
//! model's provider, with the window `models.windows` or the built-in table gives it
//! (`phosphor_base::windows`), else the request is refused with the setting to add. Requests for
//! the session model (`models.large`) are sessions; the others pass through as they came while
//! they fit (`SessionAgent::fits_as_sent`). A proxy whose session model is local (`--model-path`,
//! the embedded model) answers every request with it, whatever the request names.
//!
//! A client's own key (`x-api-key`, or `Authorization: Bearer`, an OAuth token included) is sent
//! upstream when the provider has no `api_key_env` of its own and `phosphor serve` has no key of
//! its own (then the client's key is the proxy's, and stays here). Keys live in memory only, in
//! the models built for them; no log, span or stored row holds one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, header};
use phosphor_base::ChatModel;
use phosphor_base::config::{Config, ModelConfig};
use phosphor_base::windows;
use phosphor_llm::Credential;
use phosphor_wire::{Failure, FailureKind};

/// The most models kept built at once (one per model id and client key); past it they are built
/// anew.
const MAX_BUILT: usize = 256;

/// The models a proxy's requests may name.
pub(super) struct Upstreams {
    config: Config,
    /// The session model (`models.large`, or the local model).
    main: Arc<dyn ChatModel>,
    /// Whether [`Upstreams::main`] is the configured remote `models.large`.
    remote: bool,
    built: Mutex<HashMap<Built, Arc<dyn ChatModel>>>,
}

/// What a built model is kept under: its id, and the client key it sends.
type Built = (String, Option<Credential>);

/// The model that answers one request.
pub(super) struct Chosen {
    pub(super) model: Arc<dyn ChatModel>,
    /// Whether it is the session model (the request is a session), or another model the client
    /// asked for (the request passes through while it fits).
    pub(super) main: bool,
}

impl Upstreams {
    pub(super) fn new(config: &Config, main: Arc<dyn ChatModel>, model_path_given: bool) -> Upstreams {
        let remote = config.models.large.is_some() && !model_path_given;
        Upstreams { config: config.clone(), main, remote, built: Mutex::new(HashMap::new()) }
    }

    /// The session model.
    pub(super) fn main(&self) -> &Arc<dyn ChatModel> {
        &self.main
    }

    /// The model `requested` names (`None` or empty: the session model), sent with `credential`
    /// where its provider has no key.
    pub(super) fn choose(
        &self,
        requested: Option<&str>,
        credential: Option<Credential>,
    ) -> Result<Chosen, Failure> {
        let main_id = self.main.info().model.as_str();
        let requested = requested.filter(|id| !id.is_empty()).unwrap_or(main_id);
        if !self.remote {
            return Ok(Chosen { model: self.main.clone(), main: true });
        }
        let models = &self.config.models;
        let slot = [&models.large, &models.small].into_iter().flatten().find(|slot| slot.model == requested);
        let main = requested == main_id;
        let config = match slot {
            Some(slot) => slot.clone(),
            None => {
                let Some((window, _)) = windows::lookup(requested, &models.windows) else {
                    return Err(unknown_model(requested));
                };
                let provider = models.large.as_ref().map(|large| large.provider.clone()).unwrap_or_default();
                ModelConfig {
                    provider,
                    model: requested.to_owned(),
                    context_window: window.context_window,
                    max_output_tokens: window.max_output_tokens,
                }
            }
        };
        let provider = self.config.providers.get(&config.provider);
        let owns_key = provider.is_some_and(|p| p.api_key_env.is_some());
        let credential = credential.filter(|_| !owns_key);
        if main && credential.is_none() {
            return Ok(Chosen { model: self.main.clone(), main });
        }
        let key = (requested.to_owned(), credential);
        let mut built = self.built.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(model) = built.get(&key) {
            return Ok(Chosen { model: model.clone(), main });
        }
        let Some(provider) = provider else { return Err(unknown_model(requested)) };
        let model =
            phosphor_llm::connect_as(&config.provider, provider, &config, key.1.as_ref()).map_err(|err| {
                Failure::new(400, FailureKind::InvalidRequest, format!("model {requested}: {err}"))
            })?;
        if built.len() >= MAX_BUILT {
            built.clear();
        }
        built.insert(key, model.clone());
        Ok(Chosen { model, main })
    }
}

fn unknown_model(model: &str) -> Failure {
    Failure::new(
        400,
        FailureKind::InvalidRequest,
        format!(
            "model {model:?}: its context window is not known; add it to phosphor.json, e.g. \
             \"models\": {{\"windows\": {{\"{model}\": {{\"context_window\": 128000, \"max_output_tokens\": 8192}}}}}} \
             (a key may be a pattern such as \"{}*\"), or ask for a configured model",
            model.split(['-', '.', ':']).next().unwrap_or(model),
        ),
    )
}

/// The key a client sent for the upstream, as it sent it: `x-api-key` (an API key) or
/// `Authorization: Bearer` (an API key or an OAuth token; Anthropic tells them by the header).
pub(super) fn client_credential(headers: &HeaderMap) -> Option<Credential> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(key) = header("x-api-key").filter(|k| !k.is_empty()) {
        return Some(Credential::ApiKey(key.to_owned()));
    }
    let bearer = header(header::AUTHORIZATION.as_str())?.strip_prefix("Bearer ")?.trim();
    (!bearer.is_empty()).then(|| Credential::Bearer(bearer.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::super::tests::headers;
    use super::*;
    use phosphor_base::config::parse_str;
    use std::path::Path;

    fn upstreams(json: &str) -> Upstreams {
        let config = parse_str(json, Path::new("phosphor.json")).unwrap().0;
        let large = config.models.large.as_ref().unwrap();
        let main = phosphor_llm::connect(&large.provider, &config.providers[&large.provider], large).unwrap();
        Upstreams::new(&config, main, false)
    }

    const CONFIG: &str = r#"{
        "providers": {"up": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": {
            "large": {"provider": "up", "model": "big", "context_window": 30000},
            "small": {"provider": "up", "model": "little", "context_window": 8000},
            "windows": {"mine-*": {"context_window": 16000, "max_output_tokens": 1000}}
        }
    }"#;

    #[test]
    fn the_request_names_the_model_and_its_window_comes_from_the_slot_the_config_or_the_table() {
        let up = upstreams(CONFIG);
        let info = |model: Option<&str>| {
            let chosen = up.choose(model, None).unwrap();
            let info = chosen.model.info();
            (info.model.clone(), info.context_window, chosen.main)
        };
        assert_eq!(info(None), ("big".into(), 30_000, true));
        assert_eq!(info(Some("big")), ("big".into(), 30_000, true));
        assert_eq!(info(Some("little")), ("little".into(), 8_000, false));
        assert_eq!(info(Some("mine-2")), ("mine-2".into(), 16_000, false));
        assert_eq!(info(Some("claude-haiku-4-5")), ("claude-haiku-4-5".into(), 200_000, false));
        let unknown = up.choose(Some("llama3:8b"), None).err().unwrap();
        assert_eq!(unknown.status, 400);
        assert!(
            unknown.message.contains(r#""models": {"windows": {"llama3:8b": {"context_window""#)
                && unknown.message.contains(r#""llama3*""#),
            "{}",
            unknown.message
        );
        // Built once per model and key.
        let a = up.choose(Some("mine-2"), None).unwrap().model;
        assert!(Arc::ptr_eq(&a, &up.choose(Some("mine-2"), None).unwrap().model));
        let keyed = up.choose(Some("big"), Some(Credential::ApiKey("k".into()))).unwrap();
        assert!(keyed.main && !Arc::ptr_eq(&keyed.model, up.main()));
    }

    #[test]
    fn a_provider_with_a_key_of_its_own_never_sends_the_client_s() {
        // Any variable that is set will do as the provider's key: PATH always is.
        let up = upstreams(&CONFIG.replace(
            r#""base_url": "http://127.0.0.1:9/v1""#,
            r#""base_url": "http://127.0.0.1:9/v1", "api_key_env": "PATH""#,
        ));
        let chosen = up.choose(Some("big"), Some(Credential::ApiKey("theirs".into()))).unwrap();
        assert!(Arc::ptr_eq(&chosen.model, up.main()));
    }

    #[test]
    fn a_client_key_is_read_as_sent() {
        assert_eq!(client_credential(&headers(&[])), None);
        assert_eq!(
            client_credential(&headers(&[("x-api-key", "sk-1")])),
            Some(Credential::ApiKey("sk-1".into()))
        );
        assert_eq!(
            client_credential(&headers(&[("authorization", "Bearer sk-ant-oat01-x")])),
            Some(Credential::Bearer("sk-ant-oat01-x".into()))
        );
        assert_eq!(client_credential(&headers(&[("authorization", "Basic abc")])), None);
        assert_eq!(format!("{:?}", Credential::ApiKey("sk-1".into())), "ApiKey(<redacted>)");
    }
}
