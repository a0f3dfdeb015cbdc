import { html, LitElement, nothing, type TemplateResult } from 'lit';
import { createApiClient, type ApiClient, type HitItem, type Mission } from '@mission/api-client';
import { isForUser, missionContext, STATUS_LABELS, timeLeft, type MissionContext } from './approvals';
import {
  completeSignIn,
  discover,
  refreshDelay,
  refreshSession,
  RESUME_KEY,
  signOut,
  SignInError,
  startSignIn,
  type ConsoleConfig,
  type ProviderEndpoints,
  type Session,
} from './auth';
import { EventStream, streamTypes, type StreamedEvent, type StreamState } from './event-stream';

/*
 * The approvals console: the signed-in user's pending items (assigned to them, or to nobody) with
 * their mission's context, decided with a comment; the tenant's missions; both kept current by the
 * tenant's event stream. Rendered into the light DOM, so the page's one stylesheet applies and the
 * browser's accessibility tree is the document's own.
 */

type View = 'approvals' | 'missions';
type Phase = { kind: 'starting' } | { kind: 'signed-out'; message?: string; error?: string } | { kind: 'redirecting' } | { kind: 'ready' };

interface Entry {
  readonly item: HitItem;
  context?: MissionContext;
  comment: string;
  busy: boolean;
  error?: string;
}

const LIST_PAGES = 5;
const LIST_LIMIT = 100;

export class ConsoleApp extends LitElement {
  private phase: Phase = { kind: 'starting' };
  private view: View = 'approvals';
  private config?: ConsoleConfig;
  private endpoints?: ProviderEndpoints;
  private session?: Session;
  private renewing?: Promise<Session>;
  private refreshTimer?: ReturnType<typeof setTimeout>;
  private api?: ApiClient;
  private stream?: EventStream;
  private streamState: StreamState = 'connecting';
  private entries = new Map<string, Entry>();
  private itemsLoaded = false;
  private itemsError?: string;
  private missions: Mission[] = [];
  private missionsError?: string;
  private missionsReload?: ReturnType<typeof setTimeout>;
  private announcement = '';
  private clock?: ReturnType<typeof setInterval>;

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override connectedCallback(): void {
    // The page's "Loading…" placeholder goes: the element renders into itself.
    this.replaceChildren();
    super.connectedCallback();
    void this.boot();
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    this.stopActivity();
  }

  /** Stops what a signed-in page runs: the stream, the token's renewal, the countdown, a pending reload. */
  private stopActivity(): void {
    this.stream?.stop();
    this.stream = undefined;
    clearTimeout(this.refreshTimer);
    clearInterval(this.clock);
    clearTimeout(this.missionsReload);
  }

  private set(changes: () => void): void {
    changes();
    this.requestUpdate();
  }

  private async boot(): Promise<void> {
    try {
      const response = await fetch(new URL('config.json', document.baseURI), { cache: 'no-store' });
      if (!response.ok) throw new Error(`the console's settings could not be read (${response.status})`);
      this.config = (await response.json()) as ConsoleConfig;
      this.endpoints = await discover(this.config.issuer);
    } catch (error) {
      this.set(() => (this.phase = { kind: 'signed-out', error: `The console cannot reach the identity provider: ${messageOf(error)}` }));
      return;
    }
    const here = new URL(location.href);
    if (here.pathname.endsWith('/callback') && (here.searchParams.has('code') || here.searchParams.has('error'))) {
      try {
        const session = await completeSignIn(this.config, this.endpoints, here);
        history.replaceState(null, '', this.config.consoleUrl);
        this.begin(session);
      } catch (error) {
        // A failed sign-in is not resumed by a reload: the user starts the next one.
        sessionStorage.removeItem(RESUME_KEY);
        history.replaceState(null, '', this.config.consoleUrl);
        this.set(() => (this.phase = { kind: 'signed-out', error: messageOf(error) }));
      }
      return;
    }
    if (here.searchParams.get('state') === 'signed-out') {
      history.replaceState(null, '', this.config.consoleUrl);
      this.set(() => (this.phase = { kind: 'signed-out', message: 'You are signed out.' }));
      return;
    }
    // Reloaded while signed in: the token was in memory only, so sign in again (the identity provider's session answers at once).
    if (sessionStorage.getItem(RESUME_KEY)) {
      await this.signIn('resume');
      return;
    }
    this.set(() => (this.phase = { kind: 'signed-out' }));
  }

  private async signIn(mode: 'sign-in' | 'resume'): Promise<void> {
    if (!this.config || !this.endpoints) return;
    this.set(() => (this.phase = { kind: 'redirecting' }));
    const organisation = new URL(location.href).searchParams.get('org') ?? undefined;
    await startSignIn(this.config, this.endpoints, mode, organisation);
  }

  private begin(session: Session): void {
    const config = this.config;
    if (!config) return;
    this.session = session;
    sessionStorage.setItem(RESUME_KEY, '1');
    this.scheduleRefresh();
    this.api = createApiClient({ baseUrl: config.apiUrl, token: () => this.token(false) });
    this.phase = { kind: 'ready' };
    // Deadlines count down: "in 4 min" is rendered again every 30 s.
    this.clock = setInterval(() => this.requestUpdate(), 30_000);
    this.requestUpdate();
    const types = streamTypes(session.scopes);
    if (types.length === 0) {
      this.streamState = 'stopped';
      void this.loadItems();
      void this.loadMissions();
      return;
    }
    // The lists are read once the stream is up, so that nothing created in between is missed (an
    // item both listed and announced shows once); again whenever the stream starts afresh.
    this.stream = new EventStream({
      url: `${config.apiUrl}/api/events?types=${types.join(',')}`,
      token: (renew) => this.token(renew),
      onEvent: (event) => void this.onEvent(event),
      onState: (state) => this.set(() => (this.streamState = state)),
      onLive: (resumed) => {
        if (resumed) return;
        void this.loadItems();
        void this.loadMissions();
      },
    });
    this.stream.start();
  }

  /** The access token; renewed first when it is about to expire or the gateway refused it. */
  private async token(renew: boolean): Promise<string> {
    const session = this.session;
    if (!session) throw new SignInError('Not signed in');
    if (!renew && session.expiresAt - Date.now() > 30_000) return session.accessToken;
    return (await this.renew()).accessToken;
  }

  private renew(): Promise<Session> {
    const { config, endpoints, session } = this;
    if (!config || !endpoints || !session) return Promise.reject(new SignInError('Not signed in'));
    this.renewing ??= refreshSession(config, endpoints, session)
      .then((next) => {
        this.session = next;
        this.scheduleRefresh();
        return next;
      })
      .catch((error: unknown) => {
        this.end(`Your session ended: ${messageOf(error)}`);
        throw error;
      })
      .finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  private scheduleRefresh(): void {
    clearTimeout(this.refreshTimer);
    if (!this.session) return;
    this.refreshTimer = setTimeout(() => void this.renew().catch(() => undefined), refreshDelay(this.session, Date.now()));
  }

  private end(error: string): void {
    this.stopActivity();
    sessionStorage.removeItem(RESUME_KEY);
    this.session = undefined;
    this.entries.clear();
    this.set(() => (this.phase = { kind: 'signed-out', error }));
  }

  private async signOut(): Promise<void> {
    if (!this.config || !this.endpoints) return;
    const session = this.session;
    this.stopActivity();
    this.session = undefined;
    this.set(() => (this.phase = { kind: 'redirecting' }));
    await signOut(this.config, this.endpoints, session);
  }

  // Data

  private async loadItems(): Promise<void> {
    const api = this.api;
    if (!api) return;
    try {
      let cursor: string | undefined;
      const found: HitItem[] = [];
      for (let page = 0; page < LIST_PAGES; page += 1) {
        const { data, error } = await api.GET('/api/hit', { params: { query: { limit: LIST_LIMIT, ...(cursor ? { cursor } : {}) } } });
        if (!data) throw new Error(problemText(error));
        found.push(...data.items);
        cursor = data.nextCursor ?? undefined;
        if (!cursor) break;
      }
      // What is pending now; an item already shown keeps its typed comment, a decided one goes.
      const next = new Map<string, Entry>();
      for (const item of found) {
        if (isForUser(item, this.session?.username)) next.set(item.id, this.entries.get(item.id) ?? { item, comment: '', busy: false });
      }
      for (const [id, entry] of this.entries) if (entry.busy && !next.has(id)) next.set(id, entry);
      this.set(() => {
        this.entries = next;
        this.itemsLoaded = true;
        this.itemsError = undefined;
      });
      await Promise.all([...next.values()].filter((entry) => !entry.context).map((entry) => this.loadContext(entry)));
    } catch (error) {
      this.set(() => (this.itemsError = `The approval items could not be loaded: ${messageOf(error)}`));
    }
  }

  private async loadContext(entry: Entry): Promise<void> {
    const { data } = (await this.api?.GET('/api/missions/{id}', { params: { path: { id: entry.item.missionId } } })) ?? {};
    if (data) this.set(() => (entry.context = missionContext(data, entry.item.id)));
  }

  private async loadMissions(): Promise<void> {
    const { data, error } = (await this.api?.GET('/api/missions', { params: { query: { limit: LIST_LIMIT } } })) ?? {};
    this.set(() => {
      if (data) this.missions = data.items;
      this.missionsError = data ? undefined : `The missions could not be loaded: ${problemText(error)}`;
    });
  }

  private reloadMissionsSoon(): void {
    clearTimeout(this.missionsReload);
    this.missionsReload = setTimeout(() => void this.loadMissions(), 250);
  }

  private async onEvent(event: StreamedEvent): Promise<void> {
    const hitId = typeof event.data.hitId === 'string' ? event.data.hitId : undefined;
    const missionId = typeof event.data.missionId === 'string' ? event.data.missionId : undefined;
    if (event.type.startsWith('mission.')) this.reloadMissionsSoon();
    if (event.type === 'hit.created' && hitId && !this.entries.has(hitId)) {
      const { data } = (await this.api?.GET('/api/hit/{id}', { params: { path: { id: hitId } } })) ?? {};
      if (!data || data.status !== 'pending' || !isForUser(data, this.session?.username) || this.entries.has(hitId)) return;
      const entry: Entry = { item: data, comment: '', busy: false };
      this.set(() => {
        this.entries.set(hitId, entry);
        this.announcement = `New approval: ${data.title}`;
      });
      await this.loadContext(entry);
    } else if ((event.type === 'hit.decided' || event.type === 'hit.expired') && hitId) {
      const entry = this.entries.get(hitId);
      if (entry && !entry.busy) this.dropItem(hitId, `${entry.item.title}: ${event.type === 'hit.expired' ? 'expired' : `${String(event.data.decision ?? 'decided')} elsewhere`}`);
    } else if (event.type === 'mission.completed' && missionId) {
      for (const [id, entry] of this.entries) if (entry.item.missionId === missionId && !entry.busy) this.dropItem(id, `${entry.item.title}: its mission ended`);
    }
  }

  /** Removes an item; focus inside its card moves to the list's heading rather than to nowhere. */
  private dropItem(hitId: string, announcement: string): void {
    const hadFocus = this.querySelector(`[aria-labelledby="item-${hitId}"]`)?.contains(document.activeElement) ?? false;
    this.set(() => {
      this.entries.delete(hitId);
      this.announcement = announcement;
    });
    if (hadFocus) void this.updateComplete.then(() => this.querySelector<HTMLElement>('#approvals-heading')?.focus());
  }

  private async decide(entry: Entry, decision: 'approve' | 'reject'): Promise<void> {
    const api = this.api;
    if (!api || entry.busy) return;
    this.set(() => {
      entry.busy = true;
      entry.error = undefined;
    });
    const path = decision === 'approve' ? '/api/hit/{id}/approve' : '/api/hit/{id}/reject';
    const comment = entry.comment.trim();
    const { data, error } = await api.POST(path, { params: { path: { id: entry.item.id } }, body: comment ? { comment } : {} });
    if (data) {
      const next = this.nextItemAfter(entry.item.id);
      this.dropItem(entry.item.id, `${decision === 'approve' ? 'Approved' : 'Rejected'}: ${entry.item.title}`);
      await this.updateComplete;
      (next ? this.querySelector<HTMLElement>(`#item-${next}`) : this.querySelector<HTMLElement>('#approvals-heading'))?.focus();
      return;
    }
    this.set(() => {
      entry.busy = false;
      entry.error = problemText(error);
    });
    // The button was disabled while the decision was sent, which took focus from it: give it back.
    await this.updateComplete;
    this.querySelector<HTMLElement>(`#${decision}-${entry.item.id}`)?.focus();
  }

  private nextItemAfter(hitId: string): string | undefined {
    const ids = [...this.entries.keys()];
    const at = ids.indexOf(hitId);
    return ids[at + 1] ?? ids[at - 1];
  }

  private show(view: View): void {
    this.set(() => (this.view = view));
    if (view === 'missions') void this.loadMissions();
  }

  // Rendering

  protected override render(): TemplateResult {
    const phase = this.phase;
    switch (phase.kind) {
      case 'starting':
      case 'redirecting':
        return html`${this.masthead()}
          <main class="narrow" id="main"><p role="status">${phase.kind === 'starting' ? 'Loading…' : 'Taking you to sign-in…'}</p></main>`;
      case 'signed-out':
        return html`${this.masthead()}
          <main class="narrow" id="main">
            <div class="card">
              <h1>Approvals</h1>
              <p>Decide the approval items of your organisation's missions.</p>
              ${phase.message ? html`<p role="status">${phase.message}</p>` : nothing} ${phase.error ? html`<p class="error" role="alert">${phase.error}</p>` : nothing}
              <p><button type="button" @click=${() => void this.signIn('sign-in')} ?disabled=${!this.endpoints}>Sign in</button></p>
            </div>
          </main>`;
      case 'ready':
        return this.workspace();
    }
  }

  private masthead(): TemplateResult {
    const signedIn = this.phase.kind === 'ready';
    return html`<header class="masthead">
      <span class="brand">Mission Service · Approvals</span>
      ${signedIn ? html`<span>Signed in as <strong>${this.session?.username ?? 'a user'}</strong></span>` : nothing}
      ${signedIn ? html`<button type="button" class="secondary" @click=${() => void this.signOut()}>Sign out</button>` : nothing}
    </header>`;
  }

  private workspace(): TemplateResult {
    const count = this.entries.size;
    const live = { connecting: 'Connecting to live updates…', live: 'Live updates on', reconnecting: 'Live updates interrupted; reconnecting…', stopped: 'Live updates off' }[
      this.streamState
    ];
    return html`<a class="skip-link" href="#main">Skip to content</a>
      ${this.masthead()}
      <nav class="tabs" aria-label="Views">
        <button type="button" class="tab" aria-pressed=${this.view === 'approvals'} @click=${() => this.show('approvals')}>Approvals (${count})</button>
        <button type="button" class="tab" aria-pressed=${this.view === 'missions'} @click=${() => this.show('missions')}>Missions</button>
        <p class="stream-state ${this.streamState}" role="status">${live}</p>
      </nav>
      <main id="main" class="content" tabindex="-1">${this.view === 'approvals' ? this.approvals() : this.missionList()}</main>
      <div class="visually-hidden" role="status" aria-live="polite">${this.announcement}</div>`;
  }

  private approvals(): TemplateResult {
    const entries = [...this.entries.values()];
    const cannotDecide = this.session && !this.session.scopes.includes('hits:approve');
    return html`<h1 id="approvals-heading" tabindex="-1">Waiting for your decision</h1>
      ${cannotDecide ? html`<p class="error">Your account may read approval items but not decide them (it lacks hits:approve).</p>` : nothing}
      ${this.itemsError ? html`<p class="error" role="alert">${this.itemsError}</p>` : nothing} ${!this.itemsLoaded && !this.itemsError ? html`<p>Loading…</p>` : nothing}
      ${this.itemsLoaded && entries.length === 0 ? html`<p class="muted">Nothing is waiting for you. New items appear here as they arrive.</p>` : nothing}
      <ul class="items">
        ${entries.map((entry) => html`<li>${this.itemCard(entry)}</li>`)}
      </ul>`;
  }

  private itemCard(entry: Entry): TemplateResult {
    const { item, context } = entry;
    const canDecide = this.session?.scopes.includes('hits:approve') ?? false;
    const headingId = `item-${item.id}`;
    return html`<article class="card item" aria-labelledby=${headingId}>
      <h2 id=${headingId} tabindex="-1">${item.title}</h2>
      ${item.description ? html`<p>${item.description}</p>` : nothing}
      <dl class="facts">
        <dt>Mission</dt>
        <dd>${context?.title ?? '…'}</dd>
        <dt>Objective</dt>
        <dd>${context?.objective ?? '…'}</dd>
        <dt>Deadline</dt>
        <dd>${item.expiresAt ? html`<time datetime=${item.expiresAt}>${new Date(item.expiresAt).toLocaleString()}</time> (${timeLeft(item.expiresAt, Date.now())})` : 'None'}</dd>
        ${
          item.assignees?.length
            ? html`<dt>Assigned to</dt>
                <dd>${item.assignees.join(', ')}</dd>`
            : nothing
        }
      </dl>
      ${
        context && context.earlier.length > 0
          ? html`<h3>Earlier steps</h3>
              <ol class="steps">
                ${context.earlier.map(
                  (step) =>
                    html`<li>
                      <span class="step-kind">${step.type === 'brain.query' ? 'Brain query' : 'Approval'}</span> <span class="muted">(${step.status})</span>
                      ${
                        step.lines.length
                          ? html`<ul>
                              ${step.lines.map((line) => html`<li>${line}</li>`)}
                            </ul>`
                          : nothing
                      }
                    </li>`,
                )}
              </ol>`
          : nothing
      }
      <form class="decision" @submit=${(event: Event) => event.preventDefault()}>
        <label for="comment-${item.id}">Comment <span class="muted">(optional)</span></label>
        <textarea
          id="comment-${item.id}"
          maxlength="2000"
          .value=${entry.comment}
          @input=${(event: Event) => (entry.comment = (event.target as HTMLTextAreaElement).value)}
          ?disabled=${entry.busy}
        ></textarea>
        ${entry.error ? html`<p class="error" role="alert">${entry.error}</p>` : nothing}
        <div class="actions">
          <button type="button" id="approve-${item.id}" ?disabled=${entry.busy || !canDecide} @click=${() => void this.decide(entry, 'approve')}>Approve</button>
          <button type="button" id="reject-${item.id}" class="danger" ?disabled=${entry.busy || !canDecide} @click=${() => void this.decide(entry, 'reject')}>Reject</button>
        </div>
      </form>
    </article>`;
  }

  private missionList(): TemplateResult {
    return html`<h1>Missions</h1>
      ${this.missionsError ? html`<p class="error" role="alert">${this.missionsError}</p>` : nothing}
      <table class="missions">
        <caption class="visually-hidden">
          Your organisation's missions, newest first
        </caption>
        <thead>
          <tr>
            <th scope="col">Title</th>
            <th scope="col">Status</th>
            <th scope="col">Submitted</th>
            <th scope="col">Last change</th>
          </tr>
        </thead>
        <tbody>
          ${this.missions.map(
            (mission) =>
              html`<tr>
                <td>${mission.title}</td>
                <td><span class="status status-${mission.status}">${STATUS_LABELS[mission.status]}</span></td>
                <td><time datetime=${mission.createdAt}>${new Date(mission.createdAt).toLocaleString()}</time></td>
                <td><time datetime=${mission.updatedAt}>${new Date(mission.updatedAt).toLocaleString()}</time></td>
              </tr>`,
          )}
        </tbody>
      </table>
      ${this.missions.length === 0 && !this.missionsError ? html`<p class="muted">No missions yet.</p>` : nothing}`;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A problem answer (RFC 9457) as a sentence. */
function problemText(error: unknown): string {
  if (error && typeof error === 'object') {
    const problem = error as { detail?: unknown; title?: unknown };
    if (typeof problem.detail === 'string') return problem.detail;
    if (typeof problem.title === 'string') return problem.title;
  }
  return 'the request failed';
}
