#!/usr/bin/env python3
"""Writes the fuzz seed corpora into Tests/Fixtures/fuzz/seeds/TARGET/.

  Tests/Fixtures/fuzz/make-seeds.py [LOOKUPD]

LOOKUPD (a built lookupd) compiles the directory seeds; without it the
directory seeds already present are kept. Each request-path and proxy-path
seed is one mode byte (see Sources/FuzzTargets/RequestPathTarget.swift and
ProxyPathTarget.swift) and the bytes a peer sends; each directory seed is one mode byte and a directory file.
Deterministic: the same inputs give the same files.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SEEDS = os.path.join(HERE, "seeds")
TORTURE = os.path.join(ROOT, "Tests", "Fixtures", "sip-torture")
CONFIG = os.path.join(ROOT, "Config")

UDP, TCP = 0, 1
LOCAL, TRUSTED, OUTSIDER, IPV6 = 0 << 1, 1 << 1, 2 << 1, 3 << 1
VARIANT_B = 1 << 3


def put(target, name, data):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def sip(lines, body=""):
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def invite(caller_uri, extra=(), callee="13000000000", transport="UDP", display="", to_tag=None, method="INVITE"):
    frm = (f'"{display}" ' if display else "") + f"<{caller_uri}>;tag=a73kszlfl"
    to = f"<sip:{callee}@127.0.0.1:5080>" + (f";tag={to_tag}" if to_tag else "")
    return sip([
        f"{method} sip:{callee}@127.0.0.1:5080 SIP/2.0",
        f"Via: SIP/2.0/{transport} 192.0.2.1:5060;branch=z9hG4bK74bf9;rport",
        "Max-Forwards: 70",
        f"From: {frm}",
        f"To: {to}",
        "Call-ID: 3848276298220188511@192.0.2.1",
        f"CSeq: 1 {method}",
        "Contact: <sip:pbx@192.0.2.1:5060>",
        *extra,
        "Content-Length: 0",
    ])


def request_path():
    names = sorted(n for n in os.listdir(TORTURE) if n.endswith(".dat"))
    for n in names:
        data = open(os.path.join(TORTURE, n), "rb").read()
        stem = n[:-4]
        put("request-path", f"torture-{stem}-udp", bytes([UDP | LOCAL]) + data)
        put("request-path", f"torture-{stem}-tcp", bytes([TCP | TRUSTED]) + data)
    callers = {
        "blocked": "sip:+8613800138000@pbx.example",
        "blocked-unlabelled": "sip:+8613700001111@pbx.example",
        "contact": "sip:+8613911112222@pbx.example",
        "identified": "sip:+8618600000000@pbx.example;user=phone",
        "escaped-label": "sip:+8613566667777@pbx.example",
        "backslash-label": "sip:+8613566667778@pbx.example",
        "uri-label": "sip:+8613566667779@pbx.example",
        "cjk-label": "sip:+8613511112222@pbx.example",
        "long-label": "sip:+8613511112225@pbx.example",
        "prefix": "sip:+8617012345678@pbx.example",
        "national": "sip:01059000000@pbx.example",
        "second-list": "sip:13000000001@pbx.example",
        "unknown": "sip:+8613000000009@pbx.example",
        "tel": "tel:+8613800138000;phone-context=+86",
        "anonymous": "sip:anonymous@anonymous.invalid",
        "fullwidth": "sip:%EF%BC%8B8613800138000@pbx.example",
        "letters": "sip:alice@pbx.example",
        "north-america": "sip:+12025550123@pbx.example",
    }
    for name, uri in callers.items():
        put("request-path", f"invite-{name}-udp", bytes([UDP | LOCAL]) + invite(uri))
        put("request-path", f"invite-{name}-b", bytes([UDP | LOCAL | VARIANT_B]) + invite(uri))
    pai = ["P-Asserted-Identity: <tel:+8613800138000>, \"Carrier\" <sip:+8618600000000@carrier.example>"]
    put("request-path", "invite-pai-trusted", bytes([UDP | TRUSTED]) + invite("sip:+8613000000009@pbx.example", pai))
    put("request-path", "invite-pai-ipv6", bytes([UDP | IPV6]) + invite("sip:+8613000000009@pbx.example", pai))
    put("request-path", "invite-pai-untrusted", bytes([UDP | LOCAL]) + invite("sip:+8613000000009@pbx.example", pai))
    put("request-path", "invite-privacy-id", bytes([UDP | TRUSTED]) + invite("sip:+8618600000000@pbx.example", ["Privacy: id;header", *pai]))
    put("request-path", "invite-outsider", bytes([UDP | OUTSIDER]) + invite("sip:+8613800138000@pbx.example"))
    put("request-path", "invite-outsider-b", bytes([UDP | OUTSIDER | VARIANT_B]) + invite("sip:+8613800138000@pbx.example"))
    put("request-path", "invite-display-name", bytes([UDP | LOCAL]) + invite("sip:+8613800138000@pbx.example", display='Evil \\"X-Injected: 1\\"'))
    put("request-path", "invite-folded-from", bytes([UDP | LOCAL]) + sip([
        "INVITE sip:13000000000@127.0.0.1 SIP/2.0",
        "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKf1",
        "From: \"Folded\r\n X-Injected: yes\" <sip:+8618600000000@pbx.example>;tag=1",
        "To: <sip:13000000000@127.0.0.1>", "Call-ID: fold@192.0.2.1", "CSeq: 7 INVITE", "Max-Forwards: 70", "Content-Length: 0"]))
    put("request-path", "invite-require", bytes([UDP | LOCAL]) + invite("sip:+8613800138000@pbx.example", ["Require: 100rel, foo", "Proxy-Require: bar"]))
    put("request-path", "invite-sdp", bytes([UDP | LOCAL]) + sip([
        "INVITE sip:13000000000@127.0.0.1 SIP/2.0",
        "v: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKc1, SIP/2.0/TCP 192.0.2.2;branch=z9hG4bKc2",
        "f: <sip:+8613812345678@pbx.example>;tag=1", "t: <sip:13000000000@127.0.0.1>", "i: compact@192.0.2.1",
        "CSeq: 1 INVITE", "c: application/sdp", "l: 24"], "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n"[:24]))
    for method in ["OPTIONS", "BYE", "REGISTER", "CANCEL", "ACK", "SUBSCRIBE", "FOO"]:
        put("request-path", f"method-{method.lower()}", bytes([UDP | LOCAL]) + invite("sip:pbx@192.0.2.1", method=method))
    put("request-path", "reinvite", bytes([UDP | LOCAL]) + invite("sip:+8613800138000@pbx.example", to_tag="b1"))
    put("request-path", "tcp-pipelined", bytes([TCP | LOCAL]) + invite("sip:+8613800138000@pbx.example", transport="TCP")
        + b"\r\n\r\n" + invite("sip:+8618600000000@pbx.example", transport="TCP") + b"\r\n")
    put("request-path", "tcp-ping", bytes([TCP | LOCAL]) + b"\r\n\r\n\r\n\r\n")
    put("request-path", "tcp-b-options", bytes([TCP | LOCAL | VARIANT_B]) + invite("sip:pbx@192.0.2.1", method="OPTIONS", transport="TCP"))
    put("request-path", "response", bytes([UDP | LOCAL]) + sip([
        "SIP/2.0 200 OK", "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1", "From: <sip:a@b>;tag=1", "To: <sip:c@d>;tag=2",
        "Call-ID: r@x", "CSeq: 1 OPTIONS", "Content-Length: 0"]))
    put("request-path", "keepalive", bytes([UDP | LOCAL]) + b"\r\n\r\n")


# proxy-path mode bits (Sources/FuzzTargets/ProxyPathTarget.swift).
P_CALLER, P_OUTSIDER, P_UPSTREAM_ADDRESS, P_IPV6 = 0 << 1, 1 << 1, 2 << 1, 3 << 1
P_VARIANT_B = 1 << 3
P_FROM_UPSTREAM = 1 << 4


def proxy_path():
    def via_invite(via, caller="sip:+8618600000000@pbx.example", transport="UDP", extra=(), method="INVITE", display="Trunk Caller"):
        return sip([
            f"{method} sip:13000000000@192.0.2.5:5060 SIP/2.0",
            f"Via: {via}",
            "Max-Forwards: 70",
            f'From: "{display}" <{caller}>;tag=a73kszlfl',
            "To: <sip:13000000000@192.0.2.5:5060>",
            "Call-ID: 3848276298220188511@198.51.100.7",
            f"CSeq: 1 {method}",
            "Contact: <sip:trunk@198.51.100.7:5062>",
            *extra,
            "Content-Length: 0",
        ])
    plain = "SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK74bf9;rport"
    for name, uri in {"identified": "sip:+8618600000000@pbx.example", "blocked": "sip:+8613800138000@pbx.example",
                      "escaped-label": "sip:+8613566667777@pbx.example", "unknown": "sip:+8613000000009@pbx.example",
                      "long-label": "sip:+8613511112225@pbx.example"}.items():
        put("proxy-path", f"invite-{name}", bytes([UDP | P_CALLER]) + via_invite(plain, uri))
        put("proxy-path", f"invite-{name}-b", bytes([UDP | P_CALLER | P_VARIANT_B]) + via_invite(plain, uri))
    # The Vias of issue 13 (D1, D15): an empty parameter, another protocol, another transport,
    # received/rport the caller wrote.
    for name, via in {"empty-branch": "SIP/2.0/UDP 127.0.0.9:7777;branch=", "empty-param": "SIP/2.0/UDP 127.0.0.9:7777;x=;branch=z9hG4bK1",
                      "sip-0": "SIP/0/UDP 127.0.0.9:7777;branch=z9hG4bK1", "tcp-via": "SIP/2.0/TCP 127.0.0.9:7777;branch=z9hG4bK1",
                      "lying-received": "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK1;received=127.0.0.9;rport=7777",
                      "lying-case": "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK1;Received=127.0.0.9;RPORT=7777",
                      "no-branch": "SIP/2.0/UDP 127.0.0.9:7777", "ipv6": "SIP/2.0/UDP [2001:db8::9]:7777;branch=z9hG4bK1;rport"}.items():
        put("proxy-path", f"via-{name}", bytes([UDP | P_CALLER]) + via_invite(via))
    put("proxy-path", "tcp-invite", bytes([TCP | P_CALLER]) + via_invite("SIP/2.0/TCP 198.51.100.7:5062;branch=z9hG4bK2", transport="TCP"))
    put("proxy-path", "tcp-udp-via", bytes([TCP | P_CALLER]) + via_invite(plain))
    put("proxy-path", "ipv6-invite", bytes([UDP | P_IPV6]) + via_invite("SIP/2.0/UDP [2001:db8::7]:40001;branch=z9hG4bK3;rport"))
    put("proxy-path", "outsider", bytes([UDP | P_OUTSIDER]) + via_invite(plain))
    put("proxy-path", "from-upstream-address", bytes([UDP | P_UPSTREAM_ADDRESS]) + via_invite(plain))
    for method in ["OPTIONS", "BYE", "CANCEL", "ACK", "PRACK", "FOO"]:
        put("proxy-path", f"method-{method.lower()}", bytes([UDP | P_CALLER]) + via_invite(plain, method=method))
    put("proxy-path", "options-lookupd", bytes([UDP | P_CALLER]) + sip([
        "OPTIONS sip:192.0.2.5:5060 SIP/2.0", f"Via: {plain}", "Max-Forwards: 70", "From: <sip:probe@198.51.100.7>;tag=1",
        "To: <sip:192.0.2.5:5060>", "Call-ID: probe@198.51.100.7", "CSeq: 1 OPTIONS", "Content-Length: 0"]))
    put("proxy-path", "max-forwards-0", bytes([UDP | P_CALLER]) + via_invite(plain, extra=["Max-Forwards: 0"]))
    put("proxy-path", "route", bytes([UDP | P_CALLER]) + via_invite(plain, extra=["Route: <sip:192.0.2.5:5060;lr>, <sip:pbx.example;lr>"]))
    put("proxy-path", "forged-label", bytes([UDP | P_CALLER]) + via_invite(plain, extra=["X-Caller-Label: \"Your Bank\""]))
    put("proxy-path", "display-escapes", bytes([UDP | P_CALLER | P_VARIANT_B]) + via_invite(plain, display='Evil \\"X\\" \\\\'))
    # Responses on the upstream's socket: ours (a probe's), someone else's, broken ones.
    def response(vias, code="200 OK", extra=()):
        return sip([f"SIP/2.0 {code}", *[f"Via: {v}" for v in vias], "From: <sip:+8618600000000@pbx.example>;tag=a73kszlfl",
                    "To: <sip:13000000000@192.0.2.5:5060>;tag=pbx", "Call-ID: 3848276298220188511@198.51.100.7", "CSeq: 1 INVITE",
                    *extra, "Content-Length: 0"])
    ours = "SIP/2.0/UDP 192.0.2.5:5062;branch=z9hG4bK-lkd0123456789abcdef0123456701234567"
    caller = "SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK74bf9;rport=5062;received=198.51.100.7"
    put("proxy-path", "response-ours", bytes([UDP | P_FROM_UPSTREAM]) + response([ours, caller]))
    put("proxy-path", "response-no-received", bytes([UDP | P_FROM_UPSTREAM]) + response([ours, "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK1"]))
    put("proxy-path", "response-probe", bytes([UDP | P_FROM_UPSTREAM]) + response(["SIP/2.0/UDP 192.0.2.5:5062;branch=z9hG4bK-lkdp00000001;rport"], "200 OK"))
    put("proxy-path", "response-foreign", bytes([UDP | P_FROM_UPSTREAM]) + response(["SIP/2.0/UDP 203.0.113.1:5060;branch=z9hG4bK-lkd0", caller]))
    put("proxy-path", "response-tcp", bytes([TCP | P_FROM_UPSTREAM]) + response([ours, "SIP/2.0/TCP 198.51.100.7:5062;branch=z9hG4bK2;rport=40001;received=198.51.100.7"]))
    put("proxy-path", "response-body", bytes([UDP | P_FROM_UPSTREAM]) + response([ours, caller], extra=["Content-Type: application/sdp"]).replace(b"Content-Length: 0\r\n\r\n", b"Content-Length: 4\r\n\r\nv=0\n"))
    put("proxy-path", "upstream-request", bytes([UDP | P_FROM_UPSTREAM]) + via_invite("SIP/2.0/UDP 192.0.2.20:5060;branch=z9hG4bK9"))
    for n in sorted(os.listdir(TORTURE)):
        if n.endswith(".dat") and n[:2] in ("wj", "dq", "es", "lw", "in"):
            put("proxy-path", f"torture-{n[:-4]}", bytes([UDP | P_CALLER]) + open(os.path.join(TORTURE, n), "rb").read())


def directory(lookupd):
    if not lookupd:
        return
    work = tempfile.mkdtemp(prefix="lookupd-seeds-")
    try:
        plan = os.path.join(work, "plan.conf")
        open(plan, "w").write("# China\n")
        sources = {
            "sample": os.path.join(CONFIG, "sample-directory.csv"),
        }
        texts = {
            "one-entry": "number,action,label\n+8613800138000,block,Fraud\n",
            "one-prefix": "number,action,label\n+86170*,identify,Virtual\n",
            "unlabelled": "number,action,label\n+8613800138000,block,\n+8613800138001,block,\n",
            "labels": "number,action,label\n+8613566667777,identify,\"Zoë's \"\"Café\"\" \\ Bar\"\n"
                      "+8613511112222,identify,北京市公安局\n+8613511112223,identify,مركز الاتصال\n"
                      + "".join(f"+86135000000{i:02d},identify,Label {i:02d}\n" for i in range(40)),
            "prefixes": "number,action,label\n" + "".join(f"+86{p}*,block,P{len(str(p))}\n" for p in [1, 13, 135, 1350, 13500, 135000, 1350000]),
        }
        for name, text in texts.items():
            path = os.path.join(work, name + ".csv")
            open(path, "w").write(text)
            sources[name] = path
        for name, source in sources.items():
            # Format 4 (nodes of eight) as lookupd writes it, and format 2 (binary order).
            for suffix, extra in [("", []), ("-v2", ["--file-format", "2"])]:
                out = os.path.join(work, name + suffix + ".lkd")
                subprocess.run([lookupd, "compile", "--config", plan, "-q"] + extra + [source, "-o", out], check=True)
                data = open(out, "rb").read()
                put("directory", f"{name}{suffix}-asis", bytes([0]) + data)
                put("directory", f"{name}{suffix}-fixup", bytes([1]) + data)
        put("directory", "short", bytes([0]) + b"\x89LKD\r\n\x1a\n")
    finally:
        shutil.rmtree(work)


def journal(lookupd):
    """Journals written by lookupd add/remove: each with a mode byte
    (0 as is, 1 fix up checksums) and a cut byte (where the follower's
    first poll stops: 0, the middle, the end)."""
    if not lookupd:
        return
    work = tempfile.mkdtemp(prefix="lookupd-seeds-")
    try:
        source = os.path.join(work, "base.csv")
        open(source, "w").write("number,action,label\n+8613800138000,block,Fraud\n+8613900000000,identify,Shop\n")
        base = os.path.join(work, "base.lkd")
        conf = os.path.join(work, "lookupd.conf")
        open(conf, "w").write(f"directory = {base}\n")
        subprocess.run([lookupd, "compile", "-q", source, "-o", base], check=True)
        batch = os.path.join(work, "batch.csv")
        open(batch, "w").write("number,action,label\n+8613700004444,block,\n+8613700005555,identify,Courier\n+86171*,block,Range\n")
        steps = [
            ["add", "+8613700001111", "--block"],
            ["add", "+8613700002222", "--label", "Telemarketing"],
            ["add", "+86170*", "--label", "Virtual operator"],
            ["add", "+8613700003333", "--block", "--label", "北京 \"Fraud\""],
            ["remove", "+8613800138000"],
            ["remove", "+8613700001111"],
            # Format 3: an expiring addition over a lasting one, then a batch.
            ["add", "+8613700002222", "--block", "--expires", "2030-01-01T00:00:00Z"],
            ["add", "--from-file", batch],
        ]
        journal_path = base + ".journal"
        for i, step in enumerate(steps):
            subprocess.run([lookupd] + step + ["--config", conf], check=True, stdout=subprocess.DEVNULL)
            data = open(journal_path, "rb").read()
            for cut in (0, 128, 255):
                put("journal", f"after-{i + 1}-cut{cut}-asis", bytes([0, cut]) + data)
            put("journal", f"after-{i + 1}-fixup", bytes([1, 128]) + data)
        data = open(journal_path, "rb").read()
        # The batch's last record cut off: none of it may apply.
        put("journal", "batch-cut", bytes([0, 255]) + data[:-(48 + 5)])
        put("journal", "torn-tail", bytes([0, 255]) + data[:-5])
        put("journal", "zero-tail", bytes([0, 200]) + data + bytes(40))
        put("journal", "header-only", bytes([0, 0]) + data[:40])
        put("journal", "magic-only", bytes([0, 255]) + data[:8])
    finally:
        shutil.rmtree(work)


def text_targets():
    put("config", "sample", open(os.path.join(CONFIG, "lookupd.conf"), "rb").read())
    put("config", "everything", "\n".join([
        "country-code = 86", "national-prefix = 0", "international-prefix = 00",
        "directory = /var/lib/lookupd/a.lkd name=a block-response=608",
        "directory = relative.lkd block-response=603+",
        "contacts = /etc/lookupd/contacts.vcf", "contacts = c.csv",
        "listen = udp:127.0.0.1:5060", "listen = tcp:[::1]:5060", "mode = redirect", "workers = auto",
        "allow-from = 10.0.0.0/8, 2001:db8::/32, 192.0.2.1", "refuse-action = drop",
        "trust-asserted-identity-from = 192.0.2.1", "block-response = 607", "unknown-response = 404",
        "label-header = X-Caller-Label", "max-message-size = 4096", "control-socket = /run/lookupd/c.sock",
        "state-directory = /var/lib/lookupd", "log-level = debug", "tcp-max-connections = 100", "tcp-idle-timeout = 30", ""]))
    put("config", "crlf", "listen = udp:127.0.0.1:5060\r\n# comment\r\nworkers = 2\r\n")
    put("config", "errors", "listen = udp:127.0.0.1:99999\nblock-respons = 607\n= x\n")

    put("csv", "sample", open(os.path.join(CONFIG, "sample-directory.csv"), "rb").read())
    put("csv", "semicolon", "number;action;label\n+8613800138000;block;Fraud\n+86170*;identify;\"a;b\"\"c\"\n")
    put("csv", "tab", "label\tnumber\taction\nX\t013800138000\tidentify\n")
    put("csv", "contacts", "name,number\nMum,+86 139 1111 2222\n\"Li, Lei\",136 0000 0000\nOffice,101\n")
    put("csv", "bom-crlf", b"\xef\xbb\xbfnumber,action,label\r\n+8613800138000,block,\"multi\r\nline\"\r\n")
    put("csv", "bad", "number,action,label\n+86138x,block,\n+8613800138000,allow,\n\"unterminated\n")

    put("json", "array", '[{"number": "+8613800138000", "action": "block", "label": "Fraud"},'
                         ' {"number": "+86170*", "action": "identify", "label": "V\\u00e9 \\ud83d\\ude00"}]')
    put("json", "ios", '[{"phoneNum": "13800138000", "typeName": "Telemarketing"}, {"phoneNum": 8618600000000, "typeName": null}]')
    put("json", "lines", '{"number": "+8613800138000", "action": "block"}\n{"number": "010 5900 0000", "action": "identify", "label": "H"}\n')
    put("json", "deep", "[" * 70 + "]" * 70)
    put("json", "numbers", '[{"number": 1e400, "action": "block"}, {"number": -0.0, "action": "block"}, {"number": 12345678901234567890123}]')

    put("vcard", "sample", open(os.path.join(CONFIG, "sample-contacts.vcf"), "rb").read())
    put("vcard", "apple", "BEGIN:VCARD\r\nVERSION:3.0\r\nN:Zhang;San;;;\r\nFN:Zhang San\r\nORG:Example Corp;\r\n"
                          "item1.TEL;type=CELL;type=VOICE;type=pref:+86 138 0013 8000\r\nitem1.X-ABLabel:_$!<Mobile>!$_\r\n"
                          "item2.TEL:+86 10 1234 5678\r\nEND:VCARD\r\n")
    put("vcard", "qp21", "BEGIN:VCARD\nVERSION:2.1\nN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=E7=8E=8B;=E5=B0=8F=E6=98=8E;;;\n"
                         "FN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=E7=8E=8B=E5=B0=8F=\n=E6=98=8E\nTEL;CELL:138-0013-8000\nEND:VCARD\n")
    put("vcard", "v4", "BEGIN:VCARD\nVERSION:4.0\nFN:Simon Perreault\nTEL;VALUE=uri;PREF=1;TYPE=\"voice,home\":tel:+1-555-555-5555;ext=5555\n"
                       "TEL;TYPE=cell;PID=\"1:1\":+1 555 0100\nEND:VCARD\n")
    put("vcard", "escapes", "BEGIN:VCARD\nFN:Doe\\, John\\;Jr\\\\x\\nNext\nTEL:+8613800138000\nEND:VCARD\n"
                            "BEGIN:VCARD\nFN:Evil\\r\\nX-Injected: 1\nTEL:+8613800138001\nEND:VCARD\n")
    put("vcard", "folded", "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Very Long\r\n  Name Folded\r\nTEL:+86 138\r\n 0013 8002\r\nEND:VCARD\r\n")


def main():
    lookupd = sys.argv[1] if len(sys.argv) > 1 else None
    for target in ["request-path", "proxy-path", "config", "csv", "json", "vcard"] + (["directory", "journal"] if lookupd else []):
        folder = os.path.join(SEEDS, target)
        if target != "journal":
            shutil.rmtree(folder, ignore_errors=True)
            continue
        # Journals of format 2, written by an older lookupd, stay: they are
        # still read, and no current lookupd can write them again.
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            if not name.startswith("v2-"):
                os.remove(os.path.join(folder, name))
    request_path()
    proxy_path()
    directory(lookupd)
    journal(lookupd)
    text_targets()
    total = 0
    for target in sorted(os.listdir(SEEDS)):
        files = os.listdir(os.path.join(SEEDS, target))
        total += len(files)
        print(f"{target}: {len(files)} seeds")
    print(f"total {total}")


if __name__ == "__main__":
    main()
