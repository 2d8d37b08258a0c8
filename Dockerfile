# syntax=docker/dockerfile:1
# csi-handover operator image: build with the TypeScript compiler, ship only dist/ and production deps.
#
#   docker build -t csi-handover.local/csi-handover:dev .

# ---- build ----
FROM node:24-alpine AS build
WORKDIR /app
# Dependencies first, so this layer is cached until package*.json change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src/ ./src/
# rootDir "." + outDir "dist": src/main.ts -> dist/src/main.js
RUN npx tsc -p tsconfig.build.json \
 && test -f dist/src/main.js \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime ----
FROM node:24-alpine
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules/ ./node_modules/
COPY --from=build /app/dist/ ./dist/
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["node", "dist/src/main.js"]
