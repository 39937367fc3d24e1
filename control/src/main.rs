//! The `fare` command: see `fare --help`.

fn main() -> std::process::ExitCode {
    fare::cli::main()
}
