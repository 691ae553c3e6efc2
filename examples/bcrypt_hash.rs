//! Print the bcrypt hash of a password read from stdin, for `basic_auth_users` of
//! `--web.config.file` (what `htpasswd -nBC 10 "" | tr -d ':\n'` prints), with the same crate
//! the exporter verifies with. CI uses it where apache2-utils is not installed.
//!
//! Usage: `printf %s PASSWORD | bcrypt_hash [COST]` (COST 4–31, default 10).

use std::io::Read;

fn main() {
    let cost = match std::env::args().nth(1).map(|c| c.parse::<u32>()) {
        None => 10,
        Some(Ok(c)) if (4..=31).contains(&c) => c,
        Some(_) => {
            eprintln!("usage: printf %s PASSWORD | bcrypt_hash [COST 4-31]");
            std::process::exit(2);
        }
    };
    let mut password = Vec::new();
    // bcrypt reads at most 72 bytes; a little more tells a too-long password apart.
    if let Err(e) = std::io::stdin().take(1024).read_to_end(&mut password) {
        eprintln!("cannot read the password from stdin: {e}");
        std::process::exit(2);
    }
    match bcrypt::non_truncating_hash(&password, cost) {
        Ok(hash) => println!("{hash}"),
        Err(e) => {
            eprintln!("cannot hash: {e}");
            std::process::exit(2);
        }
    }
}
