"""The TLS options and --metricsBindIp: mongod's names and checks, YAML keys, getCmdLineOpts."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from server.config import ConfigError, parse_args
from server.tls import TlsSetupError, build_server_context
from server.tls.listener import looks_like_tls
from tests.e2e.tls_certs import SERVER_KEY_PASSWORD, Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls-unit"))


def test_defaults_disabled() -> None:
    cfg = parse_args([])
    assert cfg.tls.mode == "disabled" and not cfg.tls.enabled
    assert "tls" not in cfg.parsed()["net"]
    assert cfg.metrics_bind_ip == ["127.0.0.1"]


def test_flags() -> None:
    cfg = parse_args(["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", "s.pem",
                      "--tlsCertificateKeyFilePassword", "pw", "--tlsCAFile", "ca.pem",
                      "--tlsAllowConnectionsWithoutCertificates",
                      "--tlsAllowInvalidCertificates", "--tlsDisabledProtocols", "TLS1_0,TLS1_1"])
    tls = cfg.tls
    assert (tls.mode, tls.certificate_key_file, tls.certificate_key_file_password, tls.ca_file) \
        == ("requireTLS", "s.pem", "pw", "ca.pem")
    assert tls.allow_connections_without_certificates and tls.allow_invalid_certificates
    assert tls.disabled_protocols == ("TLS1_0", "TLS1_1")
    assert cfg.parsed()["net"]["tls"] == {
        "mode": "requireTLS", "certificateKeyFile": "s.pem",
        "certificateKeyFilePassword": "<password>", "CAFile": "ca.pem",
        "allowConnectionsWithoutCertificates": True, "allowInvalidCertificates": True,
        "disabledProtocols": "TLS1_0,TLS1_1"}


def test_yaml_keys_and_flag_precedence(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("net:\n  tls:\n    mode: preferTLS\n    certificateKeyFile: /a.pem\n"
                 "    CAFile: /ca.pem\n    allowConnectionsWithoutCertificates: true\n"
                 "metrics:\n  port: 9216\n  bindIp: 0.0.0.0,::1\n")
    cfg = parse_args(["--config", str(f), "--tlsMode", "allowTLS"])
    assert cfg.tls.mode == "allowTLS"  # the flag wins over the file
    assert cfg.tls.certificate_key_file == "/a.pem" and cfg.tls.ca_file == "/ca.pem"
    assert cfg.tls.allow_connections_without_certificates
    assert cfg.metrics_port == 9216 and cfg.metrics_bind_ip == ["0.0.0.0", "::1"]
    assert parse_args(["--config", str(f), "--metricsBindIp", "10.0.0.1"]).metrics_bind_ip \
        == ["10.0.0.1"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--tlsMode", "sometimes"], "unsupported value for tlsMode sometimes"),
    (["--tlsMode", "requireTLS"],
     "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"),
    (["--tlsMode", "preferTLS", "--tlsCAFile", "ca.pem"],
     "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"),
    (["--tlsCertificateKeyFile", "s.pem"], "need to enable TLS via the sslMode/tlsMode flag"),
    (["--tlsMode", "disabled", "--tlsCAFile", "ca.pem"],
     "need to enable TLS via the sslMode/tlsMode flag"),
    (["--tlsAllowConnectionsWithoutCertificates"],
     "need to enable TLS via the sslMode/tlsMode flag"),
    (["--tlsMode", "allowTLS", "--tlsCertificateKeyFile", "s.pem", "--tlsDisabledProtocols",
      "SSL3"], "Unrecognized disabledProtocols 'SSL3'"),
    (["--metricsBindIp", " "], "metricsBindIp must be a comma-separated string"),
])
def test_invalid_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_args(argv)


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("net:\n  tls: requireTLS\n", "net.tls must be a mapping"),
    ("net:\n  tls:\n    PEMKeyFile: x\n", "Unrecognized option: net.tls.PEMKeyFile"),
    ("net:\n  tls:\n    mode: 1\n", "net.tls.mode must be a string"),
    ("net:\n  tls:\n    mode: allowTLS\n    certificateKeyFile: a\n"
     "    allowInvalidCertificates: yes please\n", "must be true or false"),
    ("metrics:\n  bindIp: [a, b]\n", "metricsBindIp must be a comma-separated string"),
])
def test_invalid_yaml(tmp_path: Path, yaml_text: str, message: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        parse_args(["--config", str(f)])


def test_password_redacted_in_argv() -> None:
    for argv, shown in [
        (["--tlsCertificateKeyFilePassword", "hunter2"],
         ["--tlsCertificateKeyFilePassword", "<password>"]),
        (["--tlsCertificateKeyFilePassword=hunter2"], ["--tlsCertificateKeyFilePassword=<password>"]),
        (["--tlsCertificateKeyFilePass", "hunter2"],  # argparse takes unique prefixes
         ["--tlsCertificateKeyFilePass", "<password>"]),
    ]:
        cfg = parse_args(["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", "k.pem", *argv])
        assert cfg.tls.certificate_key_file_password == "hunter2"
        assert cfg.argv == ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", "k.pem", *shown]
        assert "hunter2" not in repr(cfg.parsed())


def _context(*argv: str) -> ssl.SSLContext:
    return build_server_context(parse_args(["--tlsMode", "requireTLS", *argv]).tls)


def test_context_verification_modes(certs: Certs) -> None:
    key = ["--tlsCertificateKeyFile", str(certs.server)]
    ca = ["--tlsCAFile", str(certs.ca)]
    assert _context(*key).verify_mode == ssl.CERT_NONE  # no CA: no client certificate asked
    assert _context(*key, *ca).verify_mode == ssl.CERT_REQUIRED
    assert _context(*key, *ca, "--tlsAllowConnectionsWithoutCertificates").verify_mode \
        == ssl.CERT_OPTIONAL
    assert _context(*key, *ca, "--tlsAllowInvalidCertificates").verify_mode == ssl.CERT_NONE
    ctx = _context(*key)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert _context(*key, "--tlsDisabledProtocols", "TLS1_2").minimum_version \
        == ssl.TLSVersion.TLSv1_3
    assert _context(*key, "--tlsDisabledProtocols", "TLS1_3").maximum_version \
        == ssl.TLSVersion.TLSv1_2
    assert _context("--tlsCertificateKeyFile", str(certs.server_encrypted),
                    "--tlsCertificateKeyFilePassword", SERVER_KEY_PASSWORD) is not None


@pytest.mark.parametrize(("which", "extra", "message"), [
    ("missing", [], "cannot read TLS certificate key file .*: No such file or directory"),
    ("not_a_cert", [], "holds no PEM certificate"),
    ("key_only", [], "holds no PEM certificate"),
    ("client_cert", [], "must hold the certificate and its private key"),
    ("server_encrypted", [], "is encrypted: give its password"),
    ("server_encrypted", ["--tlsCertificateKeyFilePassword", "wrong"],
     "wrong tlsCertificateKeyFilePassword"),
    ("server", ["--tlsCAFile", "/no/such/ca.pem"], "cannot read TLS CA file /no/such/ca.pem"),
    ("server", ["--tlsDisabledProtocols", "TLS1_2,TLS1_3"], "leaves no protocol"),
])
def test_context_errors(certs: Certs, which: str, extra: list[str], message: str) -> None:
    path = "/no/such/file.pem" if which == "missing" else str(getattr(certs, which))
    with pytest.raises(TlsSetupError, match=message):
        _context("--tlsCertificateKeyFile", path, *extra)


def test_ca_file_that_is_not_a_certificate(certs: Certs) -> None:
    with pytest.raises(TlsSetupError, match=r"TLS CA file .* holds no PEM certificate"):
        _context("--tlsCertificateKeyFile", str(certs.server), "--tlsCAFile",
                 str(certs.not_a_cert))


def test_tls_detection_is_mongods_rule() -> None:
    hello_header = (100).to_bytes(4, "little") + (7).to_bytes(4, "little") + bytes(4) \
        + (2013).to_bytes(4, "little")
    assert not looks_like_tls(hello_header)
    assert not looks_like_tls(hello_header[:8] + b"\xff\xff\xff\xff" + hello_header[12:])
    # the start of a TLS 1.2/1.3 ClientHello: record header, handshake type and length,
    # then the protocol version 0x0303 where responseTo would be
    client_hello = bytes.fromhex("160301020001") + bytes.fromhex("0001fc0303") + b"\x8a" * 8
    assert looks_like_tls(client_hello)
    # a plaintext message whose length byte happens to be 0x16 is not TLS
    assert not looks_like_tls((0x116).to_bytes(4, "little") + hello_header[4:])
