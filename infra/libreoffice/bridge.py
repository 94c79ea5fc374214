"""The UNO side of infra/libreoffice/officeConverter.ts: connects to the soffice process the
converter started and converts one document per request line on stdin, answering one line on
stdout. Runs in Debian's own python3, where the `uno` module of python3-uno loads.

request:  {"id": 1, "input": "/tmp/x/in-1.html", "filter_in": "HTML (StarWriter)",
           "output": "/tmp/x/out-1.docx", "filter_out": "MS Word 2007 XML", "date": "2026-11-23T10:00:00Z"}
answer:   {"id": 1, "ok": true}  or  {"id": 1, "error": "why"}
"""

import json
import sys
import time

import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.util import DateTime


def prop(name, value):
    p = PropertyValue()
    p.Name = name
    p.Value = value
    return p


def connect(pipe, deadline):
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    while True:
        try:
            return resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def uno_date(text):
    d = DateTime()
    d.Year, d.Month, d.Day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    d.Hours, d.Minutes, d.Seconds = int(text[11:13]), int(text[14:16]), int(text[17:19])
    d.IsUTC = True
    return d


def fix_fields(doc, stamp, name):
    """Date, time and file-name fields show the template version's time and the document's name
    instead of the moment and the temporary file of the conversion."""
    if not hasattr(doc, "getTextFields"):
        return
    fields = doc.getTextFields().createEnumeration()
    while fields.hasMoreElements():
        field = fields.nextElement()
        try:
            if field.supportsService("com.sun.star.text.TextField.DateTime"):
                field.IsFixed = True
                field.DateTimeValue = stamp
            elif field.supportsService("com.sun.star.text.TextField.FileName"):
                field.IsFixed = True
                field.CurrentPresentation = name
        except Exception:
            pass  # a field without these properties is left as it is
    doc.getTextFields().refresh()


def set_paper(doc, paper):
    """Every page style of the document on this paper (sizes in 1/100 mm, given portrait)."""
    if not hasattr(doc, "getStyleFamilies"):
        return
    families = doc.getStyleFamilies()
    if not families.hasByName("PageStyles"):
        return
    styles = families.getByName("PageStyles")
    short, long = sorted((paper["width"], paper["height"]))
    for name in styles.getElementNames():
        style = styles.getByName(name)
        try:
            style.IsLandscape = bool(paper["landscape"])
            style.Width = long if paper["landscape"] else short
            style.Height = short if paper["landscape"] else long
        except Exception:
            pass  # a style without a size is left as it is


def convert(desktop, request):
    load = [prop("Hidden", True), prop("ReadOnly", True), prop("UpdateDocMode", 0), prop("MacroExecutionMode", 0)]
    if request.get("filter_in"):
        load.append(prop("FilterName", request["filter_in"]))
    doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(request["input"]), "_blank", 0, tuple(load))
    if doc is None:
        raise RuntimeError("LibreOffice could not open the document")
    try:
        if request.get("date"):
            # The document's own dates are the template version's, so the same version and data
            # make the same document.
            props = doc.DocumentProperties
            stamp = uno_date(request["date"])
            props.CreationDate = stamp
            props.ModificationDate = stamp
            props.PrintDate = stamp
            props.Generator = "LibreOffice"
            props.EditingCycles = 1
            props.EditingDuration = 0
            fix_fields(doc, stamp, request.get("name") or "document")
        if request.get("paper"):
            set_paper(doc, request["paper"])
        store = [prop("FilterName", request["filter_out"]), prop("Overwrite", True)]
        doc.storeToURL(uno.systemPathToFileUrl(request["output"]), tuple(store))
    finally:
        doc.close(True)


def main():
    pipe = sys.argv[1]
    context = connect(pipe, time.time() + 60)
    desktop = context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            convert(desktop, request)
            answer = {"id": request["id"], "ok": True}
        except Exception as e:  # every failure is an answer; the converter decides what it means
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            if "DisposedException" in type(e).__name__ or "disposed" in detail.lower():
                # soffice went away under this document: say so and stop, so a fresh pair starts.
                print(json.dumps({"id": request["id"], "crashed": detail}), flush=True)
                sys.exit(1)
            answer = {"id": request["id"], "error": detail}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
