"""Drives the explorer page in headless Chromium through chromedriver, as an
analyst would: chooses the app, types steps, a filter, the window and a
breakdown, and reads back what the page drew. Run by the explorer's browser
test (Tests/ExploreServerTests); prints one JSON object.

    python explore_browser.py build URL SCENARIO.json SCREENSHOT.png
    python explore_browser.py cancel URL
    python explore_browser.py persons URL SCENARIO.json STEP DOWNLOADS SCREENSHOT.png

`build` types the scenario's funnel, waits for the answer, reads the steps
table, the completion headline and the breakdown table, saves a screenshot,
copies the YAML and the shareable link, and then types a bad filter and
reads the error shown. `cancel` opens URL (a shared link whose query will
wait), waits for the progress line and the Cancel button, and clicks it.
`persons` types the scenario's funnel, clicks the steps table's drop-off of STEP,
reads the panel (the total, the persons listed, the command, the paths'
tree), downloads the CSV into DOWNLOADS, clicks the first person for their
events and saves a screenshot.
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.ui import Select, WebDriverWait


def browser(downloads=None):
    options = Options()
    if downloads:
        options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    size = os.environ.get("EXPLORE_WINDOW", "1280,1000")  # a taller one for the README's screenshot
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=" + size):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def state(driver):
    return driver.execute_script("return document.body.dataset.state || ''")


def wait_done(driver, after_id=None, timeout=120):
    """Waits until the page's latest query finished (a new one, when after_id is given)."""
    def finished(d):
        query = d.execute_script("return document.body.dataset.queryId || ''")
        return state(d) in ("done", "failed", "cancelled") and (after_id is None or query != after_id)
    WebDriverWait(driver, timeout, poll_frequency=0.1).until(finished)
    return state(driver)


def query_id(driver):
    return driver.execute_script("return document.body.dataset.queryId || ''")


def type_into(element, text):
    element.clear()
    element.send_keys(text)


def read_result(driver):
    rows = []
    for row in driver.find_elements(By.CSS_SELECTOR, "#steps-table tr[data-step]"):
        rows.append({
            "index": int(row.get_attribute("data-step")),
            "name": row.find_element(By.CSS_SELECTOR, ".name").text,
            "persons": row.get_attribute("data-persons"),
            "drop_off": row.get_attribute("data-drop-off"),
            "in_progress": row.get_attribute("data-in-progress"),
            "conversion_from_start": row.get_attribute("data-conv-start"),
            "shown_persons": row.find_element(By.CSS_SELECTOR, ".persons").text,
        })
    completion = driver.find_element(By.ID, "completion")
    breakdown = []
    for row in driver.find_elements(By.CSS_SELECTOR, "#breakdown-table tr[data-value]"):
        breakdown.append({"value": row.get_attribute("data-value"), "p_value": row.get_attribute("data-p-value")})
    return {
        "steps": rows,
        "completion": {k: completion.get_attribute("data-" + k) for k in ("value", "lo", "hi")},
        "completion_text": completion.text,
        "breakdown": breakdown,
        "funnel_svg_bars": len(driver.find_elements(By.CSS_SELECTOR, "#result svg rect")),
    }


def typed(driver):
    """The funnel the page would ask for now, as it builds it itself."""
    return driver.execute_script(
        "const d = buildDefinition(readState());"
        "return {window: d.window, breakdowns: d.breakdowns || [], audience: readState().audience,"
        " steps: d.steps.map(s => [s.event || s.screen, Object.entries(s.where || {}).map(e => e.join('=')).join(',')])};")


def expected(scenario):
    return {"window": scenario["window"], "breakdowns": [scenario["breakdown"]], "audience": scenario.get("audience", ""),
            "steps": [[step["label"], step.get("where", "")] for step in scenario["steps"]]}


def open_funnel(driver, url, scenario):
    """Opens the page at URL and types the scenario's funnel; returns how its query ended."""
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: len(Select(d.find_element(By.ID, "app")).options) > 0)
    Select(driver.find_element(By.ID, "app")).select_by_value(scenario["app"])
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.querySelectorAll('#event-names option').length") > 0)
    for _ in range(3):
        for index, step in enumerate(scenario["steps"]):
            while len(driver.find_elements(By.CSS_SELECTOR, "#steps li.step")) <= index:
                driver.find_element(By.ID, "add-step").click()
            row = driver.find_elements(By.CSS_SELECTOR, "#steps li.step")[index]
            type_into(row.find_element(By.CSS_SELECTOR, ".step-event"), step["label"])
            type_into(row.find_element(By.CSS_SELECTOR, ".step-where"), step.get("where", ""))
        type_into(driver.find_element(By.ID, "window"), scenario["window"])
        type_into(driver.find_element(By.ID, "breakdown"), scenario["breakdown"])
        if scenario.get("audience"):
            # The app's audiences come with its catalogue.
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "return [...document.querySelectorAll('#audience option')].some(o => o.value === arguments[0])", scenario["audience"]))
            Select(driver.find_element(By.ID, "audience")).select_by_value(scenario["audience"])
        time.sleep(1.0)
        if typed(driver) == expected(scenario):
            break
    # Done, and with the query of what was typed: on a loaded machine the
    # page may still be showing an earlier edit's answer when the last edit's
    # query has not started yet.
    try:
        WebDriverWait(driver, 120, poll_frequency=0.1).until(lambda d: d.execute_script(
            "const st = readState();"
            "return lastKey === JSON.stringify(requestBody(st, buildDefinition(st)))"
            " && ['done', 'failed', 'cancelled'].includes(document.body.dataset.state);"))
    except TimeoutException:
        page = driver.execute_script(
            "const st = readState(); let typed; try { typed = buildDefinition(st); } catch (e) { typed = String(e); }"
            "return {state: document.body.dataset.state, status: document.getElementById('status').textContent,"
            " typed: typed, asked: lastKey};")
        raise SystemExit("the page never answered what was typed: " + json.dumps(page))
    return state(driver)


def persons(url, scenario_path, step, downloads, screenshot):
    scenario = json.load(open(scenario_path))
    driver = browser(downloads)
    try:
        result = {"state": open_funnel(driver, url, scenario)}
        driver.find_element(By.CSS_SELECTOR, "#steps-table tr[data-step='%s'] td.drop-off" % step).click()
        WebDriverWait(driver, 60, poll_frequency=0.1).until(
            lambda d: d.execute_script("const p = document.getElementById('persons-panel'); return p && p.dataset.total !== undefined"))
        panel = driver.find_element(By.ID, "persons-panel")
        result["cell"] = panel.get_attribute("data-cell")
        result["total"] = int(panel.get_attribute("data-total"))
        result["listed"] = [row.get_attribute("data-id") for row in driver.find_elements(By.CSS_SELECTOR, "#persons-table tr[data-id]")]
        result["command"] = driver.find_element(By.ID, "persons-command").text
        # The paths' tree, drawn for a drop-off.
        WebDriverWait(driver, 60, poll_frequency=0.1).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "svg#paths g.node")) > 0)
        result["paths"] = [{"label": g.get_attribute("data-label"), "persons": int(g.get_attribute("data-persons")),
                            "depth": int(g.get_attribute("data-depth"))} for g in driver.find_elements(By.CSS_SELECTOR, "svg#paths g.node")]
        driver.find_element(By.ID, "persons-csv").click()
        WebDriverWait(driver, 60, poll_frequency=0.2).until(
            lambda d: any(name.endswith(".csv") for name in os.listdir(downloads)))
        time.sleep(0.5)
        result["downloads"] = sorted(name for name in os.listdir(downloads) if name.endswith(".csv"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#persons-table tr[data-id]")
        if rows:
            rows[0].click()
            WebDriverWait(driver, 60, poll_frequency=0.1).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#person-events-table tr")) > 0)
            result["events"] = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#person-events-table tr")]
        driver.execute_script("document.getElementById('persons-panel').scrollIntoView()")
        driver.save_screenshot(screenshot)
        result["console"] = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        print(json.dumps(result))
    finally:
        driver.quit()


def build(url, scenario_path, screenshot):
    scenario = json.load(open(scenario_path))
    driver = browser()
    try:
        # On a loaded machine a keystroke can land late or in a row the page
        # was still drawing: open_funnel types until the page's own
        # definition is the scenario's, then waits for its query.
        outcome = open_funnel(driver, url, scenario)
        result = read_result(driver) if outcome == "done" else {}
        result["state"] = outcome
        result["error"] = driver.find_element(By.ID, "error").text
        driver.save_screenshot(screenshot)
        # A run still debounced from the typing clears the YAML when it
        # starts: on a loaded machine it may come after the click, so click
        # until the YAML stays.
        def copied_yaml(d):
            d.find_element(By.ID, "copy-yaml").click()
            return d.find_element(By.ID, "yaml").text
        result["yaml"] = WebDriverWait(driver, 30, poll_frequency=0.5).until(copied_yaml)
        result["link"] = driver.current_url
        # Errors the page's script logged (before the refused request below, which Chromium logs itself).
        result["console"] = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]

        # A bad filter: the page names the field, and keeps what it drew.
        before = query_id(driver)
        row = driver.find_elements(By.CSS_SELECTOR, "#steps li.step")[0]
        type_into(row.find_element(By.CSS_SELECTOR, ".step-where"), "plan=pro")
        WebDriverWait(driver, 30, poll_frequency=0.1).until(
            lambda d: d.find_element(By.ID, "error").is_displayed() and d.find_element(By.ID, "error").text.strip() != "")
        result["bad_filter_error"] = driver.find_element(By.ID, "error").text
        result["bad_filter_result_text"] = driver.find_element(By.ID, "result").text[:200]
        print(json.dumps(result))
    finally:
        driver.quit()


def cancel(url):
    driver = browser()
    try:
        driver.get(url)
        WebDriverWait(driver, 60, poll_frequency=0.1).until(lambda d: state(d) == "running")
        button = driver.find_element(By.ID, "cancel")
        WebDriverWait(driver, 30, poll_frequency=0.1).until(lambda d: button.is_displayed())
        time.sleep(0.5)  # a poll or two: the progress line says where it waits
        progress = driver.find_element(By.ID, "status").text
        button.click()
        outcome = wait_done(driver, timeout=30)
        print(json.dumps({"progress": progress, "state": outcome, "status": driver.find_element(By.ID, "status").text}))
    finally:
        driver.quit()


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "persons":
        persons(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        cancel(sys.argv[2])
