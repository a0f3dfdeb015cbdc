import { Browser, chromium } from 'playwright-core';

/** Debian's Chromium (installed by the integration global setup), never a browser Playwright downloads. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Headless, sandbox off (CI runs as root), and none of Chromium's own background traffic: this
 * machine's network is closed, and those connections would only fail. Playwright gives every
 * launch a new, empty profile directory of its own.
 */
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: FLAGS });
}
