// Offline check of deploy/k8s: renders the base and every overlay (the kustomize subset they
// use: resources, namespace, strategic-merge patches, `$patch: delete`), validates each object
// against the Kubernetes schemas of kubernetes-models, rejects every key the schema does not
// know (the API's schemas accept unknown keys, so `hostUser: false` would pass silently and
// give the pod host users), and asserts agentbox's policy for a node pod.
//
//   node validate_manifests.mjs --caps SYS_ADMIN,NET_ADMIN,... [K8S_DIR]
//
// --caps is the list `agentbox doctor` prints (tests/deploy/test_manifests.py passes it), so
// the manifests cannot drift from what the daemon checks. Exit 0 when everything holds, else 1
// with one line per problem.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const schemas = path.join(here, "node_modules/kubernetes-models/_schemas");

// apiVersion/kind → the kubernetes-models schema of that object.
const kSchemaOf = {
  "v1/Namespace": "IoK8sApiCoreV1Namespace",
  "v1/ConfigMap": "IoK8sApiCoreV1ConfigMap",
  "v1/Service": "IoK8sApiCoreV1Service",
  "apps/v1/StatefulSet": "IoK8sApiAppsV1StatefulSet",
  "apps/v1/Deployment": "IoK8sApiAppsV1Deployment",
  "apps/v1/DaemonSet": "IoK8sApiAppsV1DaemonSet",
  "policy/v1/PodDisruptionBudget": "IoK8sApiPolicyV1PodDisruptionBudget",
};

const problems = [];
const fail = (where, what) => problems.push(`${where}: ${what}`);

// ---- rendering (the part of kustomize these manifests use) ----

function readDocs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o !== null);
}

const idOf = (o) => `${o.kind}/${o.metadata?.name}`;

// Strategic merge as kubectl does it for the fields these patches touch: maps merge, lists of
// objects merge by their merge key (containers/volumes/env by name, volumeMounts by
// mountPath, ports by containerPort), anything else is replaced.
function merge(base, patch) {
  if (Array.isArray(patch)) {
    if (!Array.isArray(base)) return structuredClone(patch);
    const key = ["name", "mountPath", "containerPort"].find((k) =>
      [...base, ...patch].every((e) => e && typeof e === "object" && k in e));
    if (!key) return structuredClone(patch);
    const out = base.map((e) => structuredClone(e));
    for (const p of patch) {
      const i = out.findIndex((e) => e[key] === p[key]);
      if (i < 0) out.push(structuredClone(p));
      else out[i] = merge(out[i], p);
    }
    return out;
  }
  if (patch && typeof patch === "object") {
    const out = base && typeof base === "object" && !Array.isArray(base) ? { ...base } : {};
    for (const [k, v] of Object.entries(patch)) out[k] = merge(out[k], v);
    return out;
  }
  return patch;
}

function render(dir) {
  const kfile = path.join(dir, "kustomization.yaml");
  const [k] = readDocs(kfile);
  let objects = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(fs.statSync(p).isDirectory() ? render(p) : readDocs(p)));
  }
  for (const { path: rel } of k.patches ?? []) {
    for (const patch of readDocs(path.join(dir, rel))) {
      const i = objects.findIndex((o) => idOf(o) === idOf(patch));
      if (i < 0) {
        fail(path.join(dir, rel), `patch target ${idOf(patch)} not found`);
        continue;
      }
      if (patch.$patch === "delete") objects.splice(i, 1);
      else objects[i] = merge(objects[i], patch);
    }
  }
  if (k.namespace) {
    objects = objects.map((o) =>
      o.kind === "Namespace" ? o : { ...o, metadata: { ...o.metadata, namespace: k.namespace } });
  }
  return objects;
}

// ---- schema and unknown keys ----

// Runs the schema's validator on a proxy that records which keys it reads on each object: a
// key in the manifest that the validator never read is one the schema does not define.
async function checkSchema(where, obj) {
  const name = kSchemaOf[`${obj.apiVersion}/${obj.kind}`];
  if (!name) return fail(where, `no schema for ${obj.apiVersion} ${obj.kind}`);
  const { validate } = await import(path.join(schemas, `${name}.js`));
  const read = new WeakMap();
  const proxies = new WeakMap();
  const wrap = (o) => {
    if (o === null || typeof o !== "object") return o;
    if (!proxies.has(o)) {
      proxies.set(o, new Proxy(o, {
        get(target, key, receiver) {
          if (typeof key === "string") {
            if (!read.has(target)) read.set(target, new Set());
            read.get(target).add(key);
          }
          return wrap(Reflect.get(target, key, receiver));
        },
      }));
    }
    return proxies.get(o);
  };
  if (!validate(wrap(obj))) {
    for (const e of validate.errors) fail(where, `schema: ${e.instancePath || "/"} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);
    return;  // a validator that stopped early did not read the rest
  }
  const walk = (o, at) => {
    if (Array.isArray(o)) return o.forEach((e, i) => walk(e, `${at}[${i}]`));
    if (o === null || typeof o !== "object") return;
    const known = read.get(o) ?? new Set();
    for (const [k, v] of Object.entries(o)) {
      if (!known.has(k)) fail(where, `unknown key ${at}.${k}`);
      else walk(v, `${at}.${k}`);
    }
  };
  walk(obj, "");
}

// ---- agentbox's policy ----

const tomlValue = (text, key) => text.match(new RegExp(`^\\s*${key}\\s*=\\s*"?([^"\\n#]*)"?`, "m"))?.[1]?.trim();

function checkNodePod(where, podSpec, objects, caps) {
  const c = podSpec.containers.find((x) => x.name === "agentbox");
  if (!c) return fail(where, "no container named agentbox");
  const sc = c.securityContext ?? {};
  if (sc.runAsUser !== 0) fail(where, "securityContext.runAsUser must be 0");
  const drop = sc.capabilities?.drop ?? [];
  if (drop.length !== 1 || drop[0] !== "ALL") fail(where, `capabilities.drop must be [ALL], is ${JSON.stringify(drop)}`);
  const add = sc.capabilities?.add ?? [];
  const want = [...caps].sort().join(",");
  if ([...new Set(add)].sort().join(",") !== want || new Set(add).size !== add.length)
    fail(where, `capabilities.add is ${JSON.stringify(add)}, agentbox doctor needs exactly ${want}`);
  const seccomp = sc.seccompProfile ?? podSpec.securityContext?.seccompProfile;
  const localOk = seccomp?.type === "Localhost" && /(^|\/)agentbox\.json$/.test(seccomp.localhostProfile ?? "");
  if (!(seccomp?.type === "Unconfined" || localOk))
    fail(where, `seccompProfile must be Unconfined or Localhost agentbox.json, is ${JSON.stringify(seccomp)}`);
  const apparmor = sc.appArmorProfile ?? podSpec.securityContext?.appArmorProfile;
  if (apparmor?.type !== "Unconfined") fail(where, `appArmorProfile must be Unconfined, is ${JSON.stringify(apparmor)}`);
  if (sc.allowPrivilegeEscalation === false)
    fail(where, "allowPrivilegeEscalation: false is rejected by the API together with SYS_ADMIN");
  const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
  const cmName = podSpec.volumes?.find((v) => v.name === "config")?.configMap?.name;
  const toml = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === cmName)?.data?.["agentbox.toml"];
  if (!toml) fail(where, "no agentbox.toml ConfigMap mounted as volume config");
  const procMount = sc.procMount ?? "Default";
  if (podSpec.hostUsers === false) {
    if (procMount !== "Unmasked") fail(where, "hostUsers: false needs procMount: Unmasked (a box mounts a fresh /proc)");
    const base = Number(env.AGENTBOX_UID_BASE);
    const count = Number(tomlValue(toml ?? "", "uid_count") ?? 65536);
    if (!Number.isInteger(base) || base < 1 || base + count - 1 > 65535)
      fail(where, `hostUsers: false: uid range ${env.AGENTBOX_UID_BASE}+${count} must lie within the pod's 0-65535`);
    if (tomlValue(toml ?? "", "disk") !== "0") fail(where, `hostUsers: false: no loop devices or quotactl, disk must be "0"`);
  } else if (procMount !== "Default") {
    fail(where, "procMount: Unmasked is accepted only with hostUsers: false");
  }
}

function checkRender(name, objects, caps) {
  const ids = objects.map(idOf);
  for (const id of ids.filter((x, i) => ids.indexOf(x) !== i)) fail(name, `${id} defined twice`);
  const ns = objects.find((o) => o.kind === "Namespace");
  if (ns?.metadata?.labels?.["pod-security.kubernetes.io/enforce"] !== "privileged")
    fail(name, "the Namespace must carry pod-security.kubernetes.io/enforce: privileged");
  const nodes = objects.filter((o) => ["StatefulSet", "DaemonSet"].includes(o.kind));
  if (nodes.length !== 1) fail(name, `expected one StatefulSet or DaemonSet of nodes, found ${nodes.length}`);
  for (const n of nodes) {
    const where = `${name}: ${idOf(n)}`;
    checkNodePod(where, n.spec.template.spec, objects, caps);
    if (n.kind !== "StatefulSet") continue;
    for (const t of n.spec.volumeClaimTemplates ?? []) {
      const modes = t.spec?.accessModes ?? [];
      if (modes.length !== 1 || modes[0] !== "ReadWriteOnce")
        fail(where, `volumeClaimTemplate ${t.metadata.name}: accessModes must be [ReadWriteOnce] (SQLite: never RWX/NFS), is ${JSON.stringify(modes)}`);
    }
    if (!(n.spec.volumeClaimTemplates ?? []).length) fail(where, "no volumeClaimTemplates");
    const r = n.spec.persistentVolumeClaimRetentionPolicy ?? {};
    if (r.whenDeleted !== "Retain" || r.whenScaled !== "Retain")
      fail(where, `persistentVolumeClaimRetentionPolicy must be Retain/Retain, is ${JSON.stringify(r)}`);
    const headless = objects.find((o) => o.kind === "Service" && o.metadata.name === n.spec.serviceName);
    if (headless?.spec?.clusterIP !== "None") fail(where, `serviceName ${n.spec.serviceName} must be a headless Service`);
    for (let i = 0; i < (n.spec.replicas ?? 1); i++) {
      const pod = `${n.metadata.name}-${i}`;
      const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === pod);
      const sel = svc?.spec?.selector ?? {};
      if (!svc || Object.keys(sel).length !== 1 || sel["statefulset.kubernetes.io/pod-name"] !== pod)
        fail(where, `needs a Service ${pod} selecting only statefulset.kubernetes.io/pod-name: ${pod}`);
      else if ((svc.spec.type ?? "ClusterIP") !== "ClusterIP" || svc.spec.clusterIP === "None")
        fail(where, `Service ${pod} must have a ClusterIP (the router's ring resolves it once)`);
    }
    const matches = (pdb) => Object.entries(pdb.spec?.selector?.matchLabels ?? {})
      .every(([k, v]) => n.spec.template.metadata.labels?.[k] === v);
    if (!objects.some((o) => o.kind === "PodDisruptionBudget" && matches(o))) fail(where, "no PodDisruptionBudget selects the nodes");
  }
  const routers = objects.filter((o) => o.kind === "Deployment" && o.metadata.name === "agentbox-router");
  if (routers.length !== 1) fail(name, "expected the Deployment agentbox-router");
  for (const r of routers) {
    if (r.spec.replicas !== 2) fail(name, `agentbox-router must have 2 replicas, has ${r.spec.replicas}`);
    const labels = r.spec.template.metadata.labels;
    const pdb = objects.find((o) => o.kind === "PodDisruptionBudget" &&
      Object.entries(o.spec?.selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v));
    if (!pdb) fail(name, "no PodDisruptionBudget selects the router");
    if (!objects.some((o) => o.kind === "Service" && o.metadata.name === "agentbox-router")) fail(name, "no Service agentbox-router");
  }
}

// ---- main ----

const args = process.argv.slice(2);
const capsAt = args.indexOf("--caps");
if (capsAt < 0 || !args[capsAt + 1]) {
  console.error("usage: validate_manifests.mjs --caps CAP,CAP,... [K8S_DIR]");
  process.exit(2);
}
const caps = args[capsAt + 1].split(",").filter(Boolean);
args.splice(capsAt, 2);
const root = path.resolve(args[0] ?? path.join(here, "../../deploy/k8s"));
const renders = [["base", path.join(root, "base")]];
for (const o of fs.readdirSync(path.join(root, "overlays")).sort())
  renders.push([`overlays/${o}`, path.join(root, "overlays", o)]);

let count = 0;
for (const [name, dir] of renders) {
  let objects;
  try {
    objects = render(dir);
  } catch (e) {
    fail(name, e.message);
    continue;
  }
  for (const o of objects) await checkSchema(`${name}: ${idOf(o)}`, o);
  checkRender(name, objects, caps);
  count += objects.length;
  console.log(`${name}: ${objects.length} objects`);
}
if (problems.length) {
  for (const p of problems) console.log(`FAIL ${p}`);
  process.exit(1);
}
console.log(`ok: ${renders.length} renders, ${count} objects`);
