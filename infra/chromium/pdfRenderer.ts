// PDF from HTML through Chromium (puppeteer-core): one browser, its pages reused, JavaScript off,
// every request but `data:` URLs aborted (and a dead proxy behind that, for anything that would get
// past it), a time limit per render, the browser recycled after N renders or a crash, and a bounded
// queue in front (infra/renderQueue.ts) where each caller has a share. Launched on the first PDF,
// not at start.

import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import path from 'node:path';
import puppeteer, { type Browser, type HTTPRequest, type Page } from 'puppeteer-core';
import { rendererUnavailable, renderTimedOut } from '../../modules/documents/domain/documents.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Paper, PdfRenderer, TemplateCaller } from '../../domain/ports.ts';
import { callerShares, RenderQueue, shareKeyOf, withTimeout } from '../renderQueue.ts';

export type ChromiumOptions = {
  /** CHROME_PATH: a Chromium or Chrome executable; else one on PATH, else @sparticuz/chromium's. */
  executablePath?: string | undefined;
  /** Pages rendering at once (default 2). */
  pages?: number;
  /** Renders that may wait for a page (default 32); beyond, 503 with Retry-After. */
  queueLimit?: number;
  /** Time limit of one render in ms (default 15,000): 503 and the page closed. */
  timeoutMs?: number;
  /** Renders after which the browser is replaced by a fresh one (default 500). */
  recycleAfter?: number;
  /** Renders one caller may have waiting or running (default 2; 429 beyond), on all pages but one:
   * a render that runs to the time limit cannot be taken back, so another caller always has a page. */
  jobsPerCaller?: number;
  logger?: { info: (obj: object, msg: string) => void; warn: (obj: object, msg: string) => void };
};

type Executable = { path: string; source: string; headless: true | 'shell' };

const onPath = async (name: string): Promise<string | undefined> => {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter((d) => d !== '')) {
    const file = path.join(dir, name);
    try {
      await access(file, constants.X_OK);
      return file;
    } catch {
      // not in this directory
    }
  }
  return undefined;
};

const INSTALL_HINT =
  "set CHROME_PATH to a Chromium or Chrome executable, install Debian's chromium, or reinstall the @sparticuz/chromium package (npm install)";

/** CHROME_PATH, else a Chromium or Chrome on PATH, else the one @sparticuz/chromium ships (unpacked
 * to the temporary folder on first use, about 3 s). */
export async function findChromium(configured?: string): Promise<Executable> {
  if (configured !== undefined) return { path: configured, source: 'CHROME_PATH', headless: true };
  for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) {
    const found = await onPath(name);
    if (found !== undefined) return { path: found, source: 'PATH', headless: true };
  }
  try {
    const { default: chromium } = await import('@sparticuz/chromium');
    return { path: await chromium.executablePath(), source: '@sparticuz/chromium', headless: 'shell' };
  } catch (error) {
    throw rendererUnavailable('PDF', `${INSTALL_HINT} (${error instanceof Error ? error.message : String(error)})`);
  }
}

/** Flags of every launch: no sandbox (containers run as root), no GPU, no background traffic, and
 * a proxy that does not exist (loopback included) for any request the page's filter let through. */
const ARGS = [
  '--no-sandbox',
  '--no-zygote',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--font-render-hinting=none',
  '--no-pings',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-default-apps',
  '--disable-sync',
  '--dns-prefetch-disable',
  '--no-first-run',
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=<-loopback>',
];

type Instance = { browser: Browser; renders: number; busy: number; idle: Page[]; retiring: boolean };

/** Only `data:` URLs load; every other request (http, file, the template's own navigation by a
 * meta refresh) is cancelled, which leaves the document as it was. */
function allowDataOnly(request: HTTPRequest): void {
  if (request.isInterceptResolutionHandled()) return;
  if (request.url().startsWith('data:')) void request.continue();
  else void request.abort('aborted');
}

export class ChromiumPdfRenderer implements PdfRenderer {
  readonly #options: Required<Omit<ChromiumOptions, 'executablePath' | 'logger'>> & Pick<ChromiumOptions, 'executablePath' | 'logger'>;
  readonly #queue: RenderQueue;
  /** The browser in use, and the launch of the next one while it starts. */
  #current: Instance | undefined;
  #launching: Promise<Instance> | undefined;
  #closed = false;
  /** Browsers launched so far (the first, then one per recycle or crash). */
  launches = 0;

  constructor(options: ChromiumOptions = {}) {
    this.#options = { pages: 2, queueLimit: 32, timeoutMs: 15_000, recycleAfter: 500, jobsPerCaller: 2, ...options };
    this.#queue = new RenderQueue({
      slots: this.#options.pages,
      queueLimit: this.#options.queueLimit,
      what: 'PDF',
      shares: callerShares('PDF', this.#options.jobsPerCaller),
    });
  }

  get queue(): RenderQueue {
    return this.#queue;
  }

  async pdf(html: string, paper: Paper, caller?: TemplateCaller): Promise<Uint8Array> {
    return this.#queue.run(async () => {
      try {
        return await this.#render(html, paper);
      } catch (error) {
        // A browser that died under this render (a crash, a kill): once more on a fresh one.
        if (!(error instanceof BrowserGone)) throw error;
      }
      try {
        return await this.#render(html, paper);
      } catch (error) {
        if (error instanceof BrowserGone)
          throw new DomainError('FORMATTER.RENDERER_CRASHED', 'The PDF renderer crashed twice on this document', [], {
            retryAfterSeconds: 1,
          });
        throw error;
      }
    }, shareKeyOf(caller));
  }

  /** The process of the browser in use, if one runs (for tests that crash it). */
  browserProcessId(): number | undefined {
    return this.#current?.browser.process()?.pid;
  }

  async #render(html: string, paper: Paper): Promise<Uint8Array> {
    const instance = await this.#instance();
    instance.busy += 1;
    instance.renders += 1;
    if (instance.renders >= this.#options.recycleAfter) this.#retire(instance, 'recycled');
    let page: Page | undefined;
    try {
      // The time limit covers making a page too: a browser that cannot is replaced below.
      const work = async () => {
        const made = instance.idle.pop() ?? (await this.#newPage(instance.browser));
        page = made;
        return { made, bytes: await this.#print(made, html, paper) };
      };
      const { made, bytes } = await withTimeout(work(), this.#options.timeoutMs, () => {
        if (page === undefined) this.#retire(instance, 'no page within the time limit');
        return renderTimedOut('PDF', this.#options.timeoutMs);
      });
      if (!instance.retiring) {
        instance.idle.push(made);
        page = undefined;
      }
      return bytes;
    } catch (error) {
      if (!instance.browser.connected) {
        this.#retire(instance, 'crashed');
        throw new BrowserGone();
      }
      throw error;
    } finally {
      instance.busy -= 1;
      if (page !== undefined) await this.#discard(instance, page);
      if (instance.retiring && instance.busy === 0) await this.#stop(instance.browser);
    }
  }

  async #print(page: Page, html: string, paper: Paper): Promise<Uint8Array> {
    const timeout = this.#options.timeoutMs;
    await page.setContent(html, { waitUntil: 'load', timeout });
    return page.pdf({
      width: `${String(paper.widthMm)}mm`,
      height: `${String(paper.heightMm)}mm`,
      landscape: paper.landscape,
      printBackground: true,
      timeout,
    });
  }

  async #newPage(browser: Browser): Promise<Page> {
    const page = await browser.newPage();
    await page.setJavaScriptEnabled(false);
    await page.setRequestInterception(true);
    page.on('request', allowDataOnly);
    return page;
  }

  /** A page that timed out or failed is closed; one that will not close takes its browser with it. */
  async #discard(instance: Instance, page: Page): Promise<void> {
    try {
      await withTimeout(page.close(), 2000, () => new Error('page did not close'));
    } catch {
      this.#retire(instance, 'a page would not close');
      if (instance.busy === 0) await this.#stop(instance.browser);
    }
  }

  async #instance(): Promise<Instance> {
    if (this.#closed) throw rendererUnavailable('PDF', 'the service is shutting down');
    if (this.#current !== undefined) return this.#current;
    this.#launching ??= this.#launch().then(
      (instance) => {
        this.#current = instance;
        this.#launching = undefined;
        return instance;
      },
      (error: unknown) => {
        this.#launching = undefined;
        throw error;
      },
    );
    return this.#launching;
  }

  async #launch(): Promise<Instance> {
    const executable = await findChromium(this.#options.executablePath);
    let browser: Browser;
    try {
      browser = await puppeteer.launch({
        executablePath: executable.path,
        headless: executable.headless,
        args: ARGS,
        // Dates printed into the PDF are then UTC whatever the machine's zone (documents.ts fixes them).
        env: { ...process.env, TZ: 'UTC' },
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
      });
    } catch (error) {
      throw rendererUnavailable(
        'PDF',
        `Chromium at ${executable.path} (${executable.source}) did not start: ${error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)}; ${INSTALL_HINT}`,
      );
    }
    this.launches += 1;
    const instance: Instance = { browser, renders: 0, busy: 0, idle: [], retiring: false };
    browser.on('disconnected', () => {
      this.#retire(instance, 'disconnected');
    });
    this.#options.logger?.info(
      { chromium: executable.path, source: executable.source, version: await browser.version() },
      'PDF renderer started',
    );
    return instance;
  }

  /** New renders go to a new browser; this one stops when its last render ends. */
  #retire(instance: Instance, reason: string): void {
    if (instance.retiring) return;
    instance.retiring = true;
    instance.idle = [];
    if (this.#current === instance) this.#current = undefined;
    if (reason !== 'recycled') this.#options.logger?.warn({ reason, renders: instance.renders }, 'PDF renderer browser replaced');
  }

  async #stop(browser: Browser): Promise<void> {
    try {
      await withTimeout(browser.close(), 3000, () => new Error('browser did not close'));
    } catch {
      browser.process()?.kill('SIGKILL');
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const current = this.#current ?? (await this.#launching?.catch(() => undefined));
    this.#current = undefined;
    if (current !== undefined) await this.#stop(current.browser);
  }
}

class BrowserGone extends Error {
  constructor() {
    super('the browser went away during the render');
  }
}
