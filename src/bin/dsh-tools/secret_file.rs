//! Secrets the command reads from files: a file others could read or replace is refused.

use std::path::Path;

/// The text of a file holding a secret (a bearer token, a client secret). A file that group or
/// others may read or write is refused, as ssh refuses such a key: the secret may have been
/// read or replaced, and the message names the fix.
pub(crate) fn read_private_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file
            .metadata()
            .map_err(|error| error.to_string())?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "group or others may read or write it (mode {:04o}): run `chmod 600 {}`, and \
                 replace the secret if others could read it",
                mode & 0o7777,
                path.display()
            ));
        }
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|error| error.to_string())?;
    Ok(text)
}
