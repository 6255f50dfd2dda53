//! Command line and environment of a runner endpoint. Flags override the
//! runner's environment variables, so an endpoint also runs outside the
//! runner's containers.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgMatches, Command};

use crate::contract::{Config, Request, Role, TestCase, EXIT_UNSUPPORTED};
use crate::{client, server, Stack};

fn command(stack: &dyn Stack) -> Command {
    Command::new(stack.name())
        .about(stack.about())
        .long_about(format!(
            "{}\n\nFollows the quic-interop-runner endpoint contract: ROLE (client|server), \
             TESTCASE, REQUESTS (space-separated https:// URLs, client), SSLKEYLOGFILE (NSS key \
             log). The server serves --www over hq-interop on UDP --listen; the client stores \
             each URL's file under --downloads. Exits 127 for an unsupported test case.\n\n\
             Test cases: handshake transfer multiplexing chacha20 retry resumption zerortt \
             keyupdate ecn multiconnect handshakeloss transferloss handshakecorruption transfercorruption \
             blackhole goodput crosstraffic",
            stack.about()
        ))
        .args(stack.args())
        .arg(opt("role", "client or server [env: ROLE]"))
        .arg(opt("testcase", "runner test case [env: TESTCASE]"))
        .arg(opt(
            "requests",
            "space-separated URLs to fetch [env: REQUESTS]",
        ))
        .arg(opt("www", "directory the server serves [default: /www]"))
        .arg(opt(
            "certs",
            "directory with cert.pem and priv.key [default: /certs]",
        ))
        .arg(opt(
            "downloads",
            "directory the client writes to [default: /downloads]",
        ))
        .arg(opt("keylog", "NSS key log file [env: SSLKEYLOGFILE]"))
        .arg(opt("listen", "server UDP address [default: [::]:443]"))
}

fn opt(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name).long(name).value_name("VALUE").help(help)
}

/// The flag `name`, else the environment variable `env`.
fn value(matches: &ArgMatches, name: &str, env: Option<&str>) -> Option<String> {
    matches
        .get_one::<String>(name)
        .cloned()
        .or_else(|| env.and_then(|e| std::env::var(e).ok()))
        .filter(|v| !v.is_empty())
}

enum Outcome {
    Run(Config),
    Unsupported(String),
}

fn config(matches: &ArgMatches) -> Result<Outcome, String> {
    let role: Role = value(matches, "role", Some("ROLE"))
        .ok_or("no role given (--role or ROLE)")?
        .parse()?;
    let name = value(matches, "testcase", Some("TESTCASE"))
        .ok_or("no test case given (--testcase or TESTCASE)")?;
    let Some(testcase) = TestCase::from_name(&name) else {
        return Ok(Outcome::Unsupported(name));
    };
    let requests = value(matches, "requests", Some("REQUESTS"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::parse::<Request>)
        .collect::<Result<Vec<_>, _>>()?;
    if role == Role::Client && requests.is_empty() {
        return Err("the client needs requests (--requests or REQUESTS)".into());
    }
    let dir = |name: &str, default: &str| {
        PathBuf::from(value(matches, name, None).unwrap_or_else(|| default.into()))
    };
    let listen = value(matches, "listen", None).unwrap_or_else(|| "[::]:443".into());
    let listen: SocketAddr = listen
        .parse()
        .map_err(|_| format!("bad listen address '{listen}'"))?;
    Ok(Outcome::Run(Config {
        role,
        testcase,
        requests,
        www: dir("www", "/www"),
        certs: dir("certs", "/certs"),
        downloads: dir("downloads", "/downloads"),
        keylog: value(matches, "keylog", Some("SSLKEYLOGFILE")).map(PathBuf::from),
        listen,
    }))
}

/// Runs the endpoint of `stack` with the process's arguments and environment.
pub fn main(stack: &mut dyn Stack) -> ExitCode {
    main_from(stack, std::env::args_os())
}

/// Runs the endpoint of `stack` with `args` (the first is the program name).
pub fn main_from(stack: &mut dyn Stack, args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let matches = match command(stack).try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if let Some(listing) = stack.listing(&matches) {
        println!("{listing}");
        return ExitCode::SUCCESS;
    }
    let config = match config(&matches) {
        Ok(Outcome::Run(c)) => c,
        Ok(Outcome::Unsupported(name)) => {
            eprintln!("{}: unsupported test case '{name}'", stack.name());
            return ExitCode::from(EXIT_UNSUPPORTED);
        }
        Err(e) => {
            eprintln!("{}: {e}", stack.name());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = stack.configure(&matches) {
        eprintln!("{}: {e}", stack.name());
        return ExitCode::from(2);
    }
    let stack: &dyn Stack = stack;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: cannot start the runtime: {e}", stack.name());
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match config.role {
            Role::Client => client::run(stack, &config).await,
            Role::Server => server::run(stack, &config).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e}", stack.name());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Vanilla;

    fn run(args: &[&str]) -> u8 {
        let mut stack = Vanilla {
            name: "test",
            about: "test endpoint",
        };
        let code = main_from(&mut stack, args.iter().map(OsString::from));
        // ExitCode has no accessor; compare against the values we return.
        [0u8, 1, 2, EXIT_UNSUPPORTED]
            .into_iter()
            .find(|c| ExitCode::from(*c) == code)
            .unwrap_or(255)
    }

    #[test]
    fn unknown_testcase_exits_127() {
        assert_eq!(
            run(&["t", "--role", "server", "--testcase", "x7f3q"]),
            EXIT_UNSUPPORTED
        );
    }

    #[test]
    fn bad_role_and_bad_url_are_errors_not_panics() {
        assert_eq!(
            run(&["t", "--role", "router", "--testcase", "handshake"]),
            2
        );
        assert_eq!(
            run(&[
                "t",
                "--role",
                "client",
                "--testcase",
                "handshake",
                "--requests",
                "ftp://x/y"
            ]),
            2
        );
    }

    #[test]
    fn missing_certs_is_a_clean_failure() {
        let code = run(&[
            "t",
            "--role",
            "server",
            "--testcase",
            "handshake",
            "--certs",
            "/nonexistent-certs",
            "--listen",
            "127.0.0.1:0",
        ]);
        assert_eq!(code, 1);
    }
}
