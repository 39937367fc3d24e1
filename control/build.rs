//! Build facts for `fare --version`: the cargo features this build enabled. (The commit
//! comes from fare-agent's build script: `fare_agent::BUILD_COMMIT`.)

fn main() {
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_lowercase))
        .filter(|f| f != "default")
        .map(|f| f.replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=FARE_FEATURES={features}");
}
