#!/usr/bin/env python3
"""Drives jellyfin-apiclient-python (written against real Jellyfin servers) against a server.

    jellyfin_apiclient_check.py check URL USER PASSWORD
        signs in, lists the views, browses each, searches and reads one item in detail;
        prints one JSON object with what it saw; exits non-zero on any failure.
    jellyfin_apiclient_check.py list URL USER PASSWORD PAGE_SIZE
        lists every movie page by page (StartIndex/Limit, as the client's callers do);
        prints one JSON object: items, seconds, items_per_second, peak_rss_kib.

Used by the integration tests (the stand-in seen by a client that is not ours) and by
`scripts/bench jellyfin` (the peer the Swift client is measured against).
"""
import json
import resource
import sys
import time

from jellyfin_apiclient_python import JellyfinClient


def signed_in(url, user, password):
    client = JellyfinClient()
    client.config.app("farcast-check", "0.1.0", "python-check", "farcast-python-check-0001")
    client.config.data["auth.ssl"] = url.startswith("https")
    state = client.auth.connect_to_address(url)
    name = getattr(state.get("State"), "name", str(state.get("State"))) if state else "none"
    if name not in ("ServerSignIn", "SignedIn"):
        raise SystemExit(f"connect_to_address failed: {state}")
    result = client.auth.login(url, user, password)
    if not result or not result.get("AccessToken"):
        raise SystemExit("login failed (no AccessToken)")
    return client, result


def check(url, user, password):
    client, login = signed_in(url, user, password)
    views = client.jellyfin.get_views()["Items"]
    seen = {"user": login["User"]["Name"], "server_id": login["ServerId"], "views": [v["Name"] for v in views], "children": {}}
    for view in views:
        children = client.jellyfin.user_items(params={"ParentId": view["Id"], "Recursive": False})
        seen["children"][view["Name"]] = [c["Name"] for c in children["Items"]]
        if children["TotalRecordCount"] != len(children["Items"]):
            raise SystemExit(f"{view['Name']}: TotalRecordCount {children['TotalRecordCount']} but {len(children['Items'])} items")
    found = client.jellyfin.search_media_items(term="Signal", media="Series")["Items"]
    seen["search_signal_series"] = [i["Name"] for i in found]
    movies = client.jellyfin.user_items(params={"Recursive": True, "IncludeItemTypes": "Movie", "SortBy": "SortName"})["Items"]
    seen["movies"] = [m["Name"] for m in movies]
    detail = client.jellyfin.get_item(movies[0]["Id"])
    seen["detail"] = {"name": detail["Name"], "run_time_ticks": detail.get("RunTimeTicks"),
                      "streams": [s["Type"] for s in detail.get("MediaStreams", [])],
                      "date_created": detail.get("DateCreated")}
    print(json.dumps(seen, sort_keys=True))


def list_all(url, user, password, page_size):
    client, _ = signed_in(url, user, password)
    start = time.monotonic()
    index, count, total = 0, 0, None
    while total is None or index < total:
        page = client.jellyfin.user_items(params={"Recursive": True, "IncludeItemTypes": "Movie", "SortBy": "SortName",
                                                  "StartIndex": index, "Limit": page_size,
                                                  "EnableTotalRecordCount": total is None})
        items = page["Items"]
        if total is None:
            total = page["TotalRecordCount"]
        for item in items:
            # Touch what a listing shows, as the Swift side does.
            _ = (item["Id"], item["Name"], item.get("ProductionYear"), item.get("UserData", {}).get("Played"))
        count += len(items)
        index += len(items)
        if not items:
            break
    seconds = time.monotonic() - start
    print(json.dumps({"items": count, "seconds": seconds, "items_per_second": count / seconds,
                      "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:5])
    elif len(sys.argv) == 6 and sys.argv[1] == "list":
        list_all(*sys.argv[2:5], int(sys.argv[5]))
    else:
        raise SystemExit(__doc__)
