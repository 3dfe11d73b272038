//! Property tests: no path segment or stored setting, however malformed, makes
//! id parsing or source parsing panic, and what parses is what it claims to be.

use proptest::prelude::*;

use crate::{
    ids::{is_uid, AppId, Ref},
    source::{KeySpec, Mode, Provider},
};

proptest! {
    #[test]
    fn any_path_segment_parses_to_an_id_a_uid_or_an_error(s in any::<String>()) {
        let _ = AppId::parse(&s);
        match Ref::<AppId>::parse(&s) {
            Ok(Ref::Id(id)) => prop_assert_eq!(id.as_str(), s.as_str()),
            Ok(Ref::Uid(uid)) => prop_assert!(is_uid(&uid) && uid == s),
            Err(e) => prop_assert!(!e.is_empty() && e.len() < 200, "errors stay short: {}", e),
        }
    }

    #[test]
    fn generated_ids_always_parse_back(_n in 0u8..16) {
        let id = AppId::generate();
        prop_assert_eq!(AppId::parse(id.as_str()), Ok(id.clone()));
        prop_assert_eq!(Ref::<AppId>::parse(id.as_str()), Ok(Ref::Id(id)));
    }

    #[test]
    fn any_json_setting_parses_or_is_refused_with_words(text in any::<String>(), name in any::<String>()) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Err(e) = KeySpec::parse(Some(&v)) {
                prop_assert!(!e.is_empty());
            }
            let _ = Provider::parse(&name, Some(&v));
        }
        let _ = Mode::parse(&name);
    }

    #[test]
    fn a_parsed_key_spec_round_trips_through_its_stored_form(
        spec in prop_oneof![
            Just(KeySpec::Provider),
            "[A-Za-z-]{1,20}".prop_map(KeySpec::Header),
            "/[a-z]{0,8}".prop_map(KeySpec::JsonPointer),
            proptest::collection::vec("/[a-z]{0,8}", 1..4).prop_map(KeySpec::Fields),
            Just(KeySpec::Body(true)),
            Just(KeySpec::Disabled(true)),
        ]
    ) {
        prop_assert_eq!(KeySpec::parse(spec.to_json().as_ref()), Ok(spec));
    }
}
