import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import * as models from 'kubernetes-models';
import { Topic, TOPIC_PARTITIONS } from '@mission/contracts';
import { busAcls } from '@mission/runtime';
import { K8sObject, renderKustomization, strategicMerge } from '../support/kustomize';

const root = path.join(__dirname, '..', '..');
const APPS = ['gateway', 'idp', 'mission-service', 'brain-service', 'hit-service', 'notification-service'] as const;
const OVERLAYS = ['dev', 'prod'] as const;
const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;

/** `kubectl kustomize` where kubectl exists (this repository's CI machine has it), else the fallback renderer. */
function render(overlay: string): K8sObject[] {
  const directory = path.join(root, 'k8s', 'overlays', overlay);
  if (!kubectl) return renderKustomization(directory);
  const output = execFileSync('kubectl', ['kustomize', directory], { encoding: 'utf8' });
  return parseAllDocuments(output).map((document) => document.toJS() as K8sObject);
}

const byKey = (objects: readonly K8sObject[]) => new Map(objects.map((object) => [`${object.kind}/${object.metadata.name}`, object]));

type PodSpec = {
  terminationGracePeriodSeconds: number;
  securityContext: { runAsNonRoot: boolean };
  containers: Array<{
    name: string;
    image: string;
    resources: { requests: Record<string, string>; limits: Record<string, string> };
    startupProbe: unknown;
    livenessProbe: { httpGet: { path: string } };
    readinessProbe: { httpGet: { path: string } };
    securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean; capabilities: { drop: string[] } };
  }>;
};

/** The model class of an object (kubernetes-models), to validate it against the Kubernetes schemas. */
function modelOf(object: K8sObject): { validate(): void } {
  const [group, version] = object.apiVersion.includes('/') ? object.apiVersion.split('/') : ['', object.apiVersion];
  const groupKey = group === '' ? 'v1' : group.replace(/\.([a-z])/g, (_m, c: string) => c.toUpperCase()).replace(/^([a-z]+)K8sIo$/, '$1K8sIo');
  const namespace = (group === '' ? models.v1 : (models as Record<string, any>)[groupKey]?.[version as string]) as
    Record<string, new (data: unknown) => { validate(): void }> | undefined;
  const Model = namespace?.[object.kind];
  if (!Model) throw new Error(`No model for ${object.apiVersion} ${object.kind}`);
  return new Model(object);
}

describe.each(OVERLAYS)('Kubernetes overlay %s', (overlay) => {
  const objects = render(overlay);
  const index = byKey(objects);
  const deployment = (app: string) =>
    index.get(`Deployment/${app}`) as K8sObject & { spec: { replicas: number; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };

  it('renders objects that all validate against the Kubernetes schemas, in one namespace', () => {
    expect(objects.length).toBeGreaterThan(30);
    for (const object of objects) {
      expect(() => modelOf(object).validate()).not.toThrow();
      expect(object.metadata.namespace).toBe(`mission-${overlay}`);
    }
  });

  it('gives every app a Deployment with probes, requests and limits, non-root and a read-only root filesystem, a Service and a PDB', () => {
    for (const app of APPS) {
      const spec = deployment(app).spec.template.spec;
      expect(spec.securityContext.runAsNonRoot).toBe(true);
      expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(40);
      const [container] = spec.containers;
      expect(container.startupProbe).toBeDefined();
      expect([container.livenessProbe.httpGet.path, container.readinessProbe.httpGet.path]).toEqual(['/health/live', '/health/ready']);
      expect(Object.keys(container.resources.requests).sort()).toEqual(['cpu', 'memory']);
      expect(Object.keys(container.resources.limits).sort()).toEqual(['cpu', 'memory']);
      expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
      expect(index.has(`Service/${app}`)).toBe(true);
      expect(index.get(`PodDisruptionBudget/${app}`)).toBeDefined();
    }
  });

  it('autoscales every app but the idp, never a consumer past the partitions of the topics it reads', () => {
    for (const app of APPS.filter((name) => name !== 'idp')) {
      const hpa = index.get(`HorizontalPodAutoscaler/${app}`) as K8sObject & { spec: { minReplicas: number; maxReplicas: number; scaleTargetRef: { name: string } } };
      expect(hpa.spec.scaleTargetRef.name).toBe(app);
      expect(hpa.spec.maxReplicas).toBeGreaterThanOrEqual(hpa.spec.minReplicas);
      const consumes = String((deployment(app).metadata as { annotations?: Record<string, string> }).annotations?.['mission-service/consumes'] ?? '')
        .split(',')
        .filter(Boolean) as Topic[];
      for (const topic of consumes) expect({ app, topic, max: hpa.spec.maxReplicas <= TOPIC_PARTITIONS[topic] }).toEqual({ app, topic, max: true });
      if (app !== 'gateway') expect(consumes.length).toBeGreaterThan(0);
    }
    expect(index.has('HorizontalPodAutoscaler/idp')).toBe(false);
  });

  it('runs each schema’s migrations in a Job of its own with --migrate-only', () => {
    for (const app of ['idp', 'mission-service', 'brain-service', 'hit-service', 'notification-service']) {
      const job = index.get(`Job/${app}-migrate`) as K8sObject & { spec: { template: { spec: { containers: Array<{ command: string[] }> } } } };
      expect(job.spec.template.spec.containers[0].command).toEqual(['node', '-r', './tools/register.cjs', `apps/${app}/src/main.ts`, '--migrate-only']);
    }
  });

  it('gives every app the payload key-encryption key as a read-only file from one Secret', () => {
    for (const app of APPS) {
      const spec = deployment(app).spec.template.spec as unknown as {
        containers: Array<{ env: Array<{ name: string; value?: string }>; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
        volumes: Array<{ name: string; secret?: { secretName: string } }>;
      };
      const [container] = spec.containers;
      const mount = container.volumeMounts.find((volume) => volume.name === 'payload-kek');
      expect({ app, mount }).toEqual({ app, mount: { name: 'payload-kek', mountPath: '/etc/mission/payload-kek', readOnly: true } });
      expect(container.env.find((variable) => variable.name === 'KEK_FILE')?.value).toBe('/etc/mission/payload-kek/KEK');
      expect(spec.volumes.find((volume) => volume.name === 'payload-kek')?.secret?.secretName).toBe('payload-kek');
    }
  });

  it('signs every app in to Kafka as its own principal, mounting its own password and no other', () => {
    type Pod = {
      containers: Array<{ env: Array<{ name: string; value?: string }>; volumeMounts: Array<{ name: string; mountPath: string }> }>;
      volumes: Array<{ name: string; secret?: { secretName: string } }>;
    };
    const secretsOf = (spec: Pod) => spec.volumes.flatMap((volume) => (volume.secret ? [volume.secret.secretName] : []));
    for (const app of APPS) {
      const spec = deployment(app).spec.template.spec as unknown as Pod;
      const env = Object.fromEntries(spec.containers[0].env.map((variable) => [variable.name, variable.value]));
      expect({ app, user: env.KAFKA_SASL_USERNAME, file: env.KAFKA_SASL_PASSWORD_FILE }).toEqual({ app, user: app, file: '/etc/mission/kafka/password' });
      // The user is a principal the ACLs know (busAcls throws for an unknown one).
      expect(busAcls(app).length).toBeGreaterThan(0);
      expect(secretsOf(spec).filter((name) => name.endsWith('-kafka') || name === 'kafka-admin')).toEqual([`${app}-kafka`]);
    }
    // Only the setup Job holds the administrator's password, and no Deployment mounts it.
    const holders = objects.filter((object) => JSON.stringify(object).includes('"secretName":"kafka-admin"')).map((object) => `${object.kind}/${object.metadata.name}`);
    expect(holders).toEqual(['Job/kafka-setup']);
    expect((index.get('ConfigMap/mission-platform') as { data?: Record<string, string> } | undefined)?.data?.KAFKA_SASL_MECHANISM).toBe('scram-sha-512');
  });

  it('commits no secret values: only references to Secrets', () => {
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
    const text = JSON.stringify(objects);
    expect(text).not.toMatch(/postgres:\/\/[^"]*:[^"@]+@/);
  });

  it('has Prometheus scrape every app on /metrics, on a port its container serves and the scrape policy admits', () => {
    const scrape = objects.find((object) => object.kind === 'NetworkPolicy' && object.metadata.name === 'prometheus-scrape') as K8sObject & {
      spec: { ingress: Array<{ ports: Array<{ port: number }> }> };
    };
    const admitted = new Set(scrape.spec.ingress.flatMap((rule) => rule.ports.map((port) => port.port)));
    for (const app of APPS) {
      const template = (deployment(app).spec.template as { metadata: { annotations?: Record<string, string> } }).metadata;
      const annotations = template.annotations ?? {};
      expect({ app, scrape: annotations['prometheus.io/scrape'], path: annotations['prometheus.io/path'] }).toEqual({ app, scrape: 'true', path: '/metrics' });
      const port = Number(annotations['prometheus.io/port']);
      const served = (deployment(app).spec.template.spec.containers[0] as { ports?: Array<{ containerPort: number }> }).ports?.map((p) => p.containerPort) ?? [];
      expect({ app, served: served.includes(port), admitted: admitted.has(port) }).toEqual({ app, served: true, admitted: true });
      // The metrics port is not the one the world may reach: no policy opens it to every source.
      const labels = deployment(app).spec.template.metadata.labels;
      const openPorts = objects
        .filter((object) => object.kind === 'NetworkPolicy')
        .map(
          (object) =>
            object as K8sObject & { spec: { podSelector: { matchLabels?: Record<string, string> }; ingress?: Array<{ from?: unknown[]; ports?: Array<{ port: number }> }> } },
        )
        .filter((policy) => Object.entries(policy.spec.podSelector.matchLabels ?? {}).every(([key, value]) => labels[key] === value))
        .flatMap((policy) => (policy.spec.ingress ?? []).filter((rule) => rule.from === undefined).flatMap((rule) => (rule.ports ?? []).map((p) => p.port)));
      expect({ app, open: openPorts.includes(port) }).toEqual({ app, open: false });
    }
  });

  it('lets only the gateway and the idp receive outside traffic, and each app reach only what it needs', () => {
    const policies = objects.filter((object) => object.kind === 'NetworkPolicy') as Array<
      K8sObject & {
        spec: {
          podSelector: { matchLabels?: Record<string, string> };
          ingress?: Array<{ from?: unknown[]; ports?: Array<{ port: number }> }>;
          egress?: Array<{ to: Array<{ podSelector?: { matchLabels: Record<string, string> }; ipBlock?: { cidr: string; except?: string[] } }>; ports: Array<{ port: number }> }>;
        };
      }
    >;
    expect(policies.find((policy) => policy.metadata.name === 'default-deny')?.spec.podSelector).toEqual({});
    const labelsOf = (app: string) => deployment(app).spec.template.metadata.labels;
    const applies = (policy: (typeof policies)[number], app: string) =>
      Object.entries(policy.spec.podSelector.matchLabels ?? {}).every(([key, value]) => labelsOf(app)[key] === value);

    const openIngress = policies.filter((policy) => (policy.spec.ingress ?? []).some((rule) => rule.from === undefined));
    const idpEnv = Object.fromEntries(
      ((deployment('idp').spec.template.spec.containers[0] as unknown as { env: Array<{ name: string; value?: string }> }).env ?? []).map((variable) => [
        variable.name,
        variable.value,
      ]),
    );
    if (overlay === 'prod') {
      // In prod the idp trusts X-Forwarded-For, so only the ingress controller may reach it.
      expect(APPS.filter((app) => openIngress.some((policy) => applies(policy, app)))).toEqual(['gateway']);
      expect(idpEnv.TRUST_PROXY).toBe('true');
      const idpIngress = policies.find((policy) => policy.metadata.name === 'idp-ingress');
      expect(idpIngress?.spec.ingress).toEqual([
        {
          from: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
            { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'gateway' } } },
          ],
          ports: [{ protocol: 'TCP', port: 3001 }],
        },
      ]);
    } else {
      expect(APPS.filter((app) => openIngress.some((policy) => applies(policy, app)))).toEqual(['gateway', 'idp']);
      expect(idpEnv.TRUST_PROXY).toBeUndefined();
    }

    const reaches = (app: string) =>
      policies
        .filter((policy) => applies(policy, app) && policy.metadata.name !== 'default-deny')
        .flatMap((policy) =>
          (policy.spec.egress ?? []).flatMap((rule) =>
            rule.to.map(
              (to) =>
                `${to.ipBlock ? `internet(${to.ipBlock.cidr})` : (to.podSelector?.matchLabels['app.kubernetes.io/name'] ?? 'dns')}:${rule.ports.map((p) => p.port).join('/')}`,
            ),
          ),
        )
        .sort();
    expect(reaches('gateway')).toEqual(['dns:53/53', 'idp:3001', 'kafka:9092', 'opentelemetry-collector:4317/4318', 'redis:6379']);
    // The idp keeps the budgets of failed authentications in Redis.
    expect(reaches('idp')).toEqual(['dns:53/53', 'kafka:9092', 'opentelemetry-collector:4317/4318', 'postgres:5432', 'redis:6379']);
    for (const app of ['mission-service', 'brain-service', 'hit-service'])
      expect({ app, reaches: reaches(app) }).toEqual({ app, reaches: ['dns:53/53', 'kafka:9092', 'opentelemetry-collector:4317/4318', 'postgres:5432'] });
    // Webhook deliveries: the internet on 443 only, never the private, link-local (metadata) or loopback ranges.
    expect(reaches('notification-service')).toEqual([
      'dns:53/53',
      'internet(0.0.0.0/0):443',
      'internet(::/0):443',
      'kafka:9092',
      'opentelemetry-collector:4317/4318',
      'postgres:5432',
    ]);
    const webhookEgress = policies.find((policy) => policy.metadata.name === 'webhook-egress')?.spec.egress?.[0]?.to ?? [];
    expect(webhookEgress.find((to) => to.ipBlock?.cidr === '0.0.0.0/0')?.ipBlock?.except).toEqual(
      expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8']),
    );
    expect(webhookEgress.find((to) => to.ipBlock?.cidr === '::/0')?.ipBlock?.except).toEqual(expect.arrayContaining(['fc00::/7', 'fe80::/10', '::1/128']));
    // Every path from one app to another is admitted on both sides: the gateway's egress to the idp, and the idp's ingress from it.
    const admits = (app: string, from: string, port: number) =>
      policies
        .filter((policy) => applies(policy, app))
        .some((policy) =>
          (policy.spec.ingress ?? []).some(
            (rule) =>
              (rule.ports ?? []).some((p) => p.port === port) &&
              (rule.from === undefined ||
                (rule.from as Array<{ podSelector?: { matchLabels: Record<string, string> } }>).some((peer) =>
                  Object.entries(peer.podSelector?.matchLabels ?? { none: 'none' }).every(([key, value]) => labelsOf(from)[key] === value),
                )),
          ),
        );
    expect(admits('idp', 'gateway', 3001)).toBe(true);
  });
});

describe('the overlays', () => {
  it('differ where they should: image, replicas and settings', () => {
    const [dev, prod] = OVERLAYS.map((overlay) => byKey(render(overlay)));
    const image = (objects: Map<string, K8sObject>) => (objects.get('Deployment/gateway')?.spec as { template: { spec: PodSpec } }).template.spec.containers[0].image;
    expect(image(dev)).toBe('mission-service:dev');
    expect(image(prod)).toBe('registry.example.com/mission-service:0.1.0');
    expect((prod.get('Deployment/gateway')?.spec as { replicas: number }).replicas).toBe(3);
    expect((dev.get('ConfigMap/mission-platform') as unknown as { data: Record<string, string> }).data.LOG_LEVEL).toBe('debug');
  });
});

describe('the gateway’s fallback limit and the idp’s keys', () => {
  const configOf = (objects: Map<string, K8sObject>) => (objects.get('ConfigMap/mission-platform') as unknown as { data: Record<string, string> }).data;

  it.each(OVERLAYS)('%s: divides a tenant’s limit by the most gateways the autoscaler may run while Redis is unreachable', (overlay) => {
    const objects = byKey(render(overlay));
    const hpa = objects.get('HorizontalPodAutoscaler/gateway')?.spec as { maxReplicas: number };
    expect(Number(configOf(objects).GATEWAY_REPLICAS)).toBe(hpa.maxReplicas);
  });

  it('prod: the gateway fetches the signing keys over HTTPS from the idp, trusting the platform CA', () => {
    const prod = byKey(render('prod'));
    expect(configOf(prod).IDP_JWKS_URI).toMatch(/^https:\/\/idp:3001\//);
    type Container = {
      env: Array<{ name: string; value?: string }>;
      volumeMounts: Array<{ name: string; mountPath: string }>;
      readinessProbe: { httpGet: { scheme?: string } };
      livenessProbe: { httpGet: { scheme?: string } };
      startupProbe: { httpGet: { scheme?: string } };
    };
    const pod = (app: string) =>
      (prod.get(`Deployment/${app}`)?.spec as { template: { spec: { containers: Container[]; volumes: Array<{ name: string; secret?: { secretName: string } }> } } }).template.spec;
    const envOf = (container: Container) => Object.fromEntries(container.env.map((entry) => [entry.name, entry.value]));
    const idp = pod('idp');
    const [idpContainer] = idp.containers as [Container];
    expect(envOf(idpContainer)).toMatchObject({ TLS_CERT: '/etc/mission/idp-tls/tls.crt', TLS_KEY: '/etc/mission/idp-tls/tls.key' });
    expect(idp.volumes.find((volume) => volume.name === 'idp-tls')?.secret?.secretName).toBe('idp-tls');
    expect(idpContainer.volumeMounts.map((mount) => mount.mountPath)).toEqual(expect.arrayContaining(['/etc/mission/idp-tls', '/etc/mission/ca']));
    for (const probe of [idpContainer.startupProbe, idpContainer.livenessProbe, idpContainer.readinessProbe]) expect(probe.httpGet.scheme).toBe('HTTPS');
    // The patch merged into the base's lists rather than replacing them.
    expect(envOf(idpContainer).DATABASE_URL).toBeUndefined();
    expect(idpContainer.env.some((entry) => entry.name === 'DATABASE_URL')).toBe(true);
    const [gateway] = pod('gateway').containers as [Container];
    expect(envOf(gateway).NODE_EXTRA_CA_CERTS).toBe('/etc/mission/ca/ca.crt');
    expect(gateway.volumeMounts.some((mount) => mount.mountPath === '/etc/mission/ca')).toBe(true);
    expect(gateway.env.some((entry) => entry.name === 'IDP_JWKS_URI')).toBe(true);
  });
});

describe('TLS to Kafka, PostgreSQL and Redis', () => {
  type Pod = {
    containers: Array<{
      env?: Array<{ name: string; valueFrom?: { configMapKeyRef?: { name: string; key: string; optional?: boolean } } }>;
      volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
    }>;
    volumes?: Array<{ name: string; configMap?: { name: string; optional?: boolean } }>;
  };
  const podOf = (object: K8sObject | undefined): Pod => (object?.spec as { template: { spec: Pod } }).template.spec;
  /** Where a pod sees the platform CA bundle: the mount of the volume made from the mission-platform-ca ConfigMap. */
  const caDirectory = (pod: Pod): string | undefined => {
    const volume = pod.volumes?.find((candidate) => candidate.configMap?.name === 'mission-platform-ca');
    return pod.containers[0].volumeMounts?.find((mount) => mount.name === volume?.name && mount.readOnly === true)?.mountPath;
  };

  it('in prod: every app trusts the platform CA for Kafka, the gateway for Redis too, and every migration Job can verify PostgreSQL', () => {
    const prod = byKey(render('prod'));
    const settings = (prod.get('ConfigMap/mission-platform') as unknown as { data: Record<string, string> }).data;
    expect(settings.REDIS_URL).toMatch(/^rediss:\/\//);
    for (const app of APPS) {
      const pod = podOf(prod.get(`Deployment/${app}`));
      const directory = caDirectory(pod);
      expect({ app, directory }).toEqual({ app, directory: '/etc/mission/ca' });
      const wanted = app === 'gateway' ? ['KAFKA_TLS_CA', 'REDIS_TLS_CA'] : ['KAFKA_TLS_CA'];
      for (const name of wanted) {
        const reference = pod.containers[0].env?.find((variable) => variable.name === name)?.valueFrom?.configMapKeyRef;
        expect({ app, name, reference: reference?.name, path: settings[reference?.key ?? ''] }).toEqual({ app, name, reference: 'mission-platform', path: `${directory}/ca.crt` });
      }
    }
    for (const app of APPS.filter((name) => name !== 'gateway'))
      expect({ app, directory: caDirectory(podOf(prod.get(`Job/${app}-migrate`))) }).toEqual({ app, directory: '/etc/mission/ca' });
  });

  it('in dev: nothing asks for TLS, and the optional CA ConfigMap and settings may be absent', () => {
    const dev = byKey(render('dev'));
    const settings = (dev.get('ConfigMap/mission-platform') as unknown as { data: Record<string, string> }).data;
    expect(settings.KAFKA_TLS_CA).toBeUndefined();
    expect(settings.REDIS_TLS_CA).toBeUndefined();
    expect(dev.has('ConfigMap/mission-platform-ca')).toBe(false);
    for (const app of APPS) {
      const pod = podOf(dev.get(`Deployment/${app}`));
      expect(pod.volumes?.find((volume) => volume.name === 'platform-ca')?.configMap).toEqual({ name: 'mission-platform-ca', optional: true });
      for (const variable of pod.containers[0].env ?? []) {
        if (variable.name.endsWith('_TLS_CA'))
          expect({ app, variable: variable.name, optional: variable.valueFrom?.configMapKeyRef?.optional }).toEqual({ app, variable: variable.name, optional: true });
      }
    }
  });
});

describe('the fallback renderer', () => {
  it('merges containers, env, volumes and mounts by name (new items first, as kubectl does) and replaces other lists', () => {
    expect(strategicMerge({ containers: [{ name: 'a', image: 'x', args: [1] }, { name: 'b' }] }, { containers: [{ name: 'a', args: [2] }] })).toEqual({
      containers: [{ name: 'a', image: 'x', args: [2] }, { name: 'b' }],
    });
    expect(
      strategicMerge(
        {
          env: [
            { name: 'A', value: '1' },
            { name: 'B', value: '2' },
          ],
        },
        {
          env: [
            { name: 'B', value: '3' },
            { name: 'C', value: '4' },
          ],
        },
      ),
    ).toEqual({
      env: [
        { name: 'C', value: '4' },
        { name: 'A', value: '1' },
        { name: 'B', value: '3' },
      ],
    });
  });

  (kubectl ? it : it.skip)('renders every overlay as kubectl kustomize does', () => {
    for (const overlay of OVERLAYS) {
      const ours = byKey(renderKustomization(path.join(root, 'k8s', 'overlays', overlay)));
      const theirs = byKey(render(overlay));
      expect([...ours.keys()].sort()).toEqual([...theirs.keys()].sort());
      for (const [key, object] of theirs) expect({ key, object: ours.get(key) }).toEqual({ key, object });
    }
  });
});
