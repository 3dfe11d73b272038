//! Test certificates made with the `openssl` command: a CA, a server certificate
//! for `localhost` and `127.0.0.1` signed by it, a client certificate, and a
//! second CA that signed nothing of ours (to be refused).

use std::{path::PathBuf, process::Command};

/// The files of one test's certificates, in a directory of its own.
pub struct TestCerts {
    pub dir: PathBuf,
}

impl TestCerts {
    pub fn make() -> Self {
        let dir = std::env::temp_dir().join(format!("hookgate-certs-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let certs = TestCerts { dir };
        certs.ca("ca");
        certs.ca("other-ca");
        let server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
                          keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n";
        certs.leaf("server", "localhost", server_ext);
        let client_ext = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n";
        certs.leaf("client", "certuser", client_ext);
        certs
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl").current_dir(&self.dir).args(args).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn ca(&self, name: &str) {
        let (key, crt, subj) = (format!("{name}.key"), format!("{name}.crt"), format!("/CN=hookgate test {name}"));
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-days",
            "2",
            "-subj",
            &subj,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
    }

    fn leaf(&self, name: &str, cn: &str, ext: &str) {
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        std::fs::write(self.dir.join(format!("{name}.ext")), ext).unwrap();
        let subj = format!("/CN={cn}");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &subj,
        ]);
        let extfile = format!("{name}.ext");
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            &extfile,
        ]);
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
