#!/usr/bin/python3
"""Drives lookupd's status page in headless Chromium (Debian's chromium,
chromium-driver and python3-selenium) for Tests/DaemonTests/StatusPageTests.

  status-page.py --url http://127.0.0.1:PORT/ --number +8613800138000 \
                 --screenshots DIR [--fingerprint FILE [--update]] \
                 [--token TOKEN --block NUMBER --expires 1h]

Loads the page at desktop width, reads what it shows (the calls per verdict
of the last hour, the recent calls, the directories), looks up --number with
the search box and reads the verdict, checks that no markup from the data
became an element and that the browser reported no error (a script error, a
Content-Security-Policy violation); with --token, uses the form to block
--block (expiring after --expires) first with a wrong token, then with
TOKEN, reading the answer the page shows each time and where the token
could have been left (the field, storage, cookies, the URL); then loads it at phone width and checks
that nothing is wider than the screen. Screenshots go to DIR:
status-page-desktop.png (the whole page) and status-page-phone.png (its first
screen, at twice the pixels as a phone has them).

--fingerprint: the SHA-256 of the page's files as served, recorded when the
screenshots in docs/images were taken; the result says whether they still
match (--update records the current one).

Prints one JSON object with everything observed; the Swift test judges it.
Exit status 0 when the browser ran, 1 otherwise (with the reason on stderr).
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

PAGE_FILES = ["", "status.css", "status.js"]
DESKTOP = (1280, 900)
PHONE = (390, 844)


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-extensions", "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
                 "--force-color-profile=srgb", "--lang=en-US", "--user-data-dir=" + profile):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def emulate(driver, width, height, mobile):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile})


def load(driver, url):
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.body.dataset.loaded === 'yes'"))


def screenshot(driver, path, whole):
    """The whole page, or what the first screen shows."""
    size = driver.execute_script("return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    if not whole:
        size[1] = driver.execute_script("return window.innerHeight")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    return path


def observe(driver):
    return driver.execute_script("""
        const text = (e) => e ? e.textContent : null;
        const totals = {};
        for (const li of document.querySelectorAll('#totals li')) totals[li.dataset.verdict] = text(li.querySelector('.count'));
        const recent = [...document.querySelectorAll('#recent-calls tbody tr')].map((tr) => {
            const row = {};
            for (const td of tr.querySelectorAll('td[data-field]')) row[td.dataset.field] = td.textContent;
            return row;
        }).filter((row) => Object.keys(row).length);
        const directories = [...document.querySelectorAll('#directory-table tbody tr')].map((tr) => {
            const row = {name: tr.dataset.directory};
            for (const td of tr.querySelectorAll('td[data-field]')) row[td.dataset.field] = td.textContent;
            return row;
        });
        return {
            totals, recent, directories,
            summary: text(document.getElementById('summary')),
            problem: document.getElementById('problem').hidden ? null : text(document.getElementById('problem')),
            bars: document.querySelectorAll('#chart rect').length,
            // Markup that came from the data would show up as elements.
            injected: document.querySelectorAll('main img, main script, main iframe, main svg:not(#chart), [onerror], [onload]').length,
            scripts: [...document.scripts].map((s) => s.getAttribute('src')),
            pwned: window.__lookupdPwned === true,
        };
    """)


def type_into(driver, element_id, value):
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def submit_and_read(driver, form, result):
    """Submits the form, waits for its result list to show, returns it by data-field."""
    driver.execute_script("document.getElementById(arguments[0]).hidden = true", result)
    driver.find_element(By.CSS_SELECTOR, "#%s button[type=submit]" % form).click()
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return !document.getElementById(arguments[0]).hidden", result))
    return driver.execute_script("""
        const out = {};
        for (const dd of document.getElementById(arguments[0]).querySelectorAll('dd')) out[dd.dataset.field] = dd.textContent;
        return out;
    """, result)


def lookup(driver, number):
    type_into(driver, "lookup-number", number)
    return submit_and_read(driver, "lookup-form", "lookup-result")


def apply_change(driver, token, number, expires):
    """Enters the token, submits a block through the form, returns the answer shown."""
    type_into(driver, "token", token)
    driver.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()
    type_into(driver, "change-number", number)
    type_into(driver, "change-expires", expires)
    driver.execute_script("document.getElementById('change-action').value = 'block'")
    out = submit_and_read(driver, "change-form", "change-result")
    out["state"] = driver.find_element(By.ID, "token-state").text
    return out


def token_traces(driver, token):
    """Where the page could have left the token, besides its script's memory."""
    return driver.execute_script("""
        const token = arguments[0], found = [];
        if (document.getElementById('token').value) found.push('the token field');
        for (const [name, store] of [['localStorage', localStorage], ['sessionStorage', sessionStorage]]) {
            for (let i = 0; i < store.length; i++) if (store.getItem(store.key(i)).includes(token)) found.push(name);
            if (store.length) found.push(name + ' is not empty');
        }
        if (document.cookie) found.push('a cookie');
        if (location.href.includes(token)) found.push('the URL');
        if (document.documentElement.outerHTML.includes(token)) found.push('the document');
        return found;
    """, token)


def fingerprint(url):
    digest = hashlib.sha256()
    for name in PAGE_FILES:
        with urllib.request.urlopen(url + name, timeout=10) as response:
            body = response.read()
        digest.update(name.encode() + b"\0" + str(len(body)).encode() + b"\0" + body)
    return digest.hexdigest()


def console_problems(driver):
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") in ("SEVERE", "WARNING")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--number", required=True)
    ap.add_argument("--screenshots", required=True)
    ap.add_argument("--fingerprint")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--token")
    ap.add_argument("--block")
    ap.add_argument("--expires", default="1h")
    args = ap.parse_args()
    url = args.url if args.url.endswith("/") else args.url + "/"
    os.makedirs(args.screenshots, exist_ok=True)
    result = {}
    with tempfile.TemporaryDirectory(prefix="lookupd-chromium.") as profile:
        driver = browser(profile)
        try:
            emulate(driver, *DESKTOP, mobile=False)
            load(driver, url)
            result["desktop"] = observe(driver)
            result["lookup"] = lookup(driver, args.number)
            result["desktop"]["console"] = console_problems(driver)
            if args.token and args.block:
                form = {"wrong": apply_change(driver, "not-" + args.token, args.block, args.expires),
                        "right": apply_change(driver, args.token, args.block, args.expires)}
                form["traces"] = token_traces(driver, args.token)
                # The refused request is logged by the browser as a failed load; the test reads these.
                form["console"] = console_problems(driver)
                result["form"] = form
            result["desktop"]["screenshot"] = screenshot(driver, os.path.join(args.screenshots, "status-page-desktop.png"), whole=True)

            emulate(driver, *PHONE, mobile=True)
            load(driver, url)
            time.sleep(0.2)
            phone = observe(driver)
            phone["viewport"] = driver.execute_script("return window.innerWidth")
            phone["widest"] = driver.execute_script("return document.documentElement.scrollWidth")
            phone["console"] = console_problems(driver)
            phone["screenshot"] = screenshot(driver, os.path.join(args.screenshots, "status-page-phone.png"), whole=False)
            result["phone"] = phone
        finally:
            driver.quit()
    if args.fingerprint:
        served = fingerprint(url)
        if args.update:
            with open(args.fingerprint, "w") as f:
                f.write(served + "\n")
        try:
            with open(args.fingerprint) as f:
                recorded = f.read().strip()
        except FileNotFoundError:
            recorded = "(no %s)" % args.fingerprint
        result["fingerprint"] = {"served": served, "recorded": recorded}
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # the Swift test shows this
        print("status-page.py: %s: %s" % (type(error).__name__, error), file=sys.stderr)
        sys.exit(1)
