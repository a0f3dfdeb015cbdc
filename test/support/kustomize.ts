/**
 * Renders a kustomization of this repository without kubectl, for machines that lack it. It
 * implements only what k8s/ uses: resources (files and directories), namespace, labels (pairs on
 * metadata only), images, replicas and strategic-merge patches (maps merged, `containers` merged
 * by name, other lists replaced). The unit test checks it against `kubectl kustomize` wherever
 * kubectl exists, so it cannot silently drift from the real thing.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [key: string]: unknown };

interface Kustomization {
  resources?: string[];
  namespace?: string;
  labels?: Array<{ pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }>;
  images?: Array<{ name: string; newName?: string; newTag?: string }>;
  replicas?: Array<{ name: string; count: number }>;
  patches?: Array<{ path: string }>;
}

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'labels', 'images', 'replicas', 'patches']);

function readDocuments(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Lists that a strategic merge patch merges item by item on their `name` (as the Kubernetes schemas declare). */
const NAME_KEYED_LISTS = new Set(['containers', 'initContainers', 'env', 'volumes', 'volumeMounts']);

/** Strategic merge as far as k8s/ needs it. */
export function strategicMerge(target: unknown, patch: unknown, key = ''): unknown {
  if (Array.isArray(patch) && Array.isArray(target) && NAME_KEYED_LISTS.has(key)) {
    const merged = target.map((item) => {
      const match = patch.find((candidate) => isObject(candidate) && isObject(item) && candidate.name === item.name);
      return match ? strategicMerge(item, match) : item;
    });
    // Items the target lacks go first, in the patch's order, as kubectl kustomize puts them.
    const added = patch.filter((item) => !target.some((existing) => isObject(existing) && isObject(item) && existing.name === item.name));
    return [...added, ...merged];
  }
  if (isObject(target) && isObject(patch)) {
    const out: Record<string, unknown> = { ...target };
    for (const [name, value] of Object.entries(patch)) out[name] = name in target ? strategicMerge(target[name], value, name) : value;
    return out;
  }
  return patch;
}

function containersOf(object: K8sObject): Array<Record<string, unknown>> {
  const spec = object.spec as { template?: { spec?: { containers?: Array<Record<string, unknown>> } } } | undefined;
  return spec?.template?.spec?.containers ?? [];
}

export function renderKustomization(directory: string): K8sObject[] {
  const kustomization = readDocuments(path.join(directory, 'kustomization.yaml'))[0] as unknown as Kustomization;
  const unsupported = Object.keys(kustomization).filter((field) => !SUPPORTED.has(field));
  if (unsupported.length > 0) throw new Error(`${directory}: the fallback renderer does not support ${unsupported.join(', ')}; render with kubectl kustomize`);
  let objects: K8sObject[] = [];
  for (const resource of kustomization.resources ?? []) {
    const target = path.join(directory, resource);
    objects.push(...(resource.endsWith('.yaml') ? readDocuments(target) : renderKustomization(target)));
  }
  for (const { path: patchFile } of kustomization.patches ?? []) {
    for (const patch of readDocuments(path.join(directory, patchFile))) {
      const index = objects.findIndex((object) => object.kind === patch.kind && object.metadata.name === patch.metadata.name);
      if (index < 0) throw new Error(`${patchFile}: no ${patch.kind} ${patch.metadata.name} to patch`);
      objects[index] = strategicMerge(objects[index], patch) as K8sObject;
    }
  }
  for (const { name, count } of kustomization.replicas ?? []) {
    for (const object of objects) if (object.kind === 'Deployment' && object.metadata.name === name) (object.spec as { replicas: number }).replicas = count;
  }
  for (const image of kustomization.images ?? []) {
    for (const object of objects) {
      const containers = [
        ...containersOf(object),
        ...((object.spec as { template?: { spec?: { initContainers?: Array<Record<string, unknown>> } } })?.template?.spec?.initContainers ?? []),
      ];
      for (const container of containers) {
        const [current, tag] = String(container.image).split(':');
        if (current !== image.name) continue;
        container.image = `${image.newName ?? current}:${image.newTag ?? tag ?? 'latest'}`;
      }
    }
  }
  for (const { pairs, includeSelectors, includeTemplates } of kustomization.labels ?? []) {
    if (includeSelectors || includeTemplates) throw new Error('the fallback renderer only puts labels on metadata');
    objects = objects.map((object) => ({ ...object, metadata: { ...object.metadata, labels: { ...object.metadata.labels, ...pairs } } }));
  }
  if (kustomization.namespace) {
    objects = objects.map((object) => ({ ...object, metadata: { ...object.metadata, namespace: kustomization.namespace } }));
  }
  return objects;
}
