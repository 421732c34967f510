fn main() -> std::process::ExitCode {
    rewind_fuzz::cli::main()
}
